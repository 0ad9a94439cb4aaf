package pack

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPackTree packs PACK_BENCH_DIR (a real tree: e.g. the peers race's npm workspace) to io.Discard; with
// -cpuprofile it shows where the engine's CPU goes.
func BenchmarkPackTree(b *testing.B) {
	dir := os.Getenv("PACK_BENCH_DIR")
	if dir == "" {
		b.Skip("PACK_BENCH_DIR names the tree to pack")
	}
	for b.Loop() {
		if _, err := Run(Options{Root: dir, Manifest: filepath.Join(b.TempDir(), "m.json")}, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeltaTree makes a delta of PACK_BENCH_DIR against PACK_BENCH_BASE (that tree's manifest, made by a full
// pass beforehand: `snapflow-lazy pack`): the walk, the base's read, the classification and what changed since.
func BenchmarkDeltaTree(b *testing.B) {
	dir, base := os.Getenv("PACK_BENCH_DIR"), os.Getenv("PACK_BENCH_BASE")
	if dir == "" || base == "" {
		b.Skip("PACK_BENCH_DIR names the tree, PACK_BENCH_BASE its full pass's manifest")
	}
	raw, err := os.ReadFile(base)
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	for b.Loop() {
		out := b.TempDir()
		d := Delta{Base: base, Sha256: hex.EncodeToString(sum[:]), LayerOver: "base", Keep: filepath.Join(out, "kept.json")}
		if _, err := RunDelta(Options{Root: dir, Manifest: filepath.Join(out, "layer.json")}, d, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

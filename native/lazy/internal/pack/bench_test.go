package pack

import (
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

package filecas

import (
	"os"
	"path/filepath"
	"testing"
)

// discard is a Sink that keeps nothing.
type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Close() error                { return nil }

// BenchmarkFilesPack backs FILECAS_BENCH_DIR up (a real tree: e.g. the peers race's npm workspace) to a discarding
// sink; with FILECAS_BENCH_BASE (the index of an earlier pass over it: `snapflow-lazy files-pack`) it is an
// incremental. With -cpuprofile it shows where the engine's CPU goes.
func BenchmarkFilesPack(b *testing.B) {
	dir := os.Getenv("FILECAS_BENCH_DIR")
	if dir == "" {
		b.Skip("FILECAS_BENCH_DIR names the tree to back up")
	}
	var base *BaseSource
	if file := os.Getenv("FILECAS_BENCH_BASE"); file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		base = &BaseSource{File: file, Sha256: sum(raw)}
	}
	for b.Loop() {
		out := b.TempDir()
		if _, err := Backup(Options{Root: dir, Manifest: filepath.Join(out, "m.json"), Index: filepath.Join(out, "i.zst"), Name: "bench", Base: base}, discard{}); err != nil {
			b.Fatal(err)
		}
	}
}

package filesfs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"snapflow/native/lazy/internal/fetch"
	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/urlfile"
)

// BenchmarkFilesLoad is what a files mount does before it can answer: decode and validate FILES_BENCH_INDEX (a real
// index: e.g. the npm workspace's, made by files-pack), lay out its tree, and count the cache.
func BenchmarkFilesLoad(b *testing.B) {
	path := os.Getenv("FILES_BENCH_INDEX")
	if path == "" {
		b.Skip("FILES_BENCH_INDEX names a file-level index")
	}
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		x, err := filecas.Decode(f, filecas.DefaultLimits)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Build(x); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFilesComplete prefetches every chunk of FILES_BENCH_INDEX from the packs in FILES_BENCH_PACKS (a directory
// of files named by pack) into a fresh cache: with -cpuprofile it shows where completing a mount's cache goes.
func BenchmarkFilesComplete(b *testing.B) {
	path, packs := os.Getenv("FILES_BENCH_INDEX"), os.Getenv("FILES_BENCH_PACKS")
	if path == "" || packs == "" {
		b.Skip("FILES_BENCH_INDEX names a file-level index, FILES_BENCH_PACKS the directory of its packs")
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	x, err := filecas.Decode(f, filecas.DefaultLimits)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(packs)))
	defer srv.Close()
	urls := map[string]string{}
	for _, p := range x.Packs {
		urls[p.Name] = srv.URL + "/" + p.Name
	}
	urlPath := filepath.Join(b.TempDir(), "urls.json")
	if err := writeJSON(urlPath, urls); err != nil {
		b.Fatal(err)
	}
	u, err := urlfile.Open(urlPath)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		ct, err := NewContent(ctx, x, b.TempDir(), &fetch.Fetcher{URLs: u}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		ct.Prefetch(ctx, PrefetchOptions{Workers: 16, GroupBytes: 4 << 20, GapBytes: 64 << 10, Passes: 1})
		if st := ct.Snapshot("ready"); st.CompleteMs < 0 {
			b.Fatalf("not complete: %+v", st.Chunks)
		}
		cancel()
	}
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

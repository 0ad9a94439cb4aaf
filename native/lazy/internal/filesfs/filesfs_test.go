package filesfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"snapflow/native/lazy/internal/fetch"
	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/testkit"
	"snapflow/native/lazy/internal/urlfile"
)

// served is a generated tree, its index and pack, the pack served over HTTP and a Content reading from it.
type served struct {
	src   string
	x     *filecas.Index
	pack  []byte
	store *testkit.PackStore
	ct    *Content
	cache string
}

const packName = "snap-1"

func serve(t *testing.T, avg int) *served {
	t.Helper()
	s := &served{src: filepath.Join(t.TempDir(), "src")}
	testkit.FilesTree(t, s.src, 1)
	s.x, s.pack = testkit.FilesPack(t, s.src, packName, avg)
	// What a mount reads is what Decode accepts: round-trip the index through its encoding.
	var buf bytes.Buffer
	if err := filecas.Encode(&buf, s.x); err != nil {
		t.Fatal(err)
	}
	x, err := filecas.Decode(&buf, filecas.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	s.x = x
	s.store = testkit.NewPackStore(map[string][]byte{packName: s.pack})
	t.Cleanup(s.store.Close)
	s.ct = s.content(t, filepath.Join(t.TempDir(), "cache"))
	return s
}

// content starts a Content over the served pack with cacheDir as its cache.
func (s *served) content(t *testing.T, cacheDir string) *Content {
	t.Helper()
	urls := filepath.Join(t.TempDir(), "urls.json")
	if err := s.store.WriteURLs(urls); err != nil {
		t.Fatal(err)
	}
	u, err := urlfile.Open(urls)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ct, err := NewContent(ctx, s.x, cacheDir, &fetch.Fetcher{URLs: u, Timeout: 2 * time.Second, Retries: 1, Backoff: 10 * time.Millisecond}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.cache = cacheDir
	return ct
}

func (s *served) entry(t *testing.T, path string) *filecas.Entry {
	t.Helper()
	for i := range s.x.Entries {
		if s.x.Entries[i].Path == path {
			return &s.x.Entries[i]
		}
	}
	t.Fatalf("%s not in the index", path)
	return nil
}

func (s *served) read(ctx context.Context, e *filecas.Entry, off int64, n int) ([]byte, error) {
	p := make([]byte, n)
	k, err := s.ct.ReadFile(ctx, Segments(s.x, e), e.Size, p, off)
	return p[:k], err
}

func TestReadsGiveTheFilesBytesAtEveryOffsetHolesIncluded(t *testing.T) {
	s := serve(t, 16<<10)
	for _, name := range []string{"a/b/c/big.bin", "pkg/lib/one.js", "a/sparse.img", "a/small.txt", "a/zero"} {
		want, err := os.ReadFile(filepath.Join(s.src, name))
		if err != nil {
			t.Fatal(err)
		}
		e := s.entry(t, name)
		if name == "a/sparse.img" && len(e.Data) == 0 {
			t.Fatalf("the sparse file has no data regions in the index: %+v", e.Data)
		}
		// Reads of odd sizes at odd offsets, crossing chunk and region edges, and past the end.
		for _, r := range [][2]int64{{0, 4096}, {1, 70_001}, {int64(len(want)) / 3, 131_072}, {int64(len(want)) - 5, 4096}, {int64(len(want)) + 10, 10}} {
			if r[0] < 0 {
				continue
			}
			got, err := s.read(context.Background(), e, r[0], int(r[1]))
			if err != nil {
				t.Fatalf("%s at %d: %v", name, r[0], err)
			}
			lo, hi := min(r[0], int64(len(want))), min(r[0]+r[1], int64(len(want)))
			if !bytes.Equal(got, want[lo:hi]) {
				t.Fatalf("%s [%d,+%d): %d bytes differ from the source's %d", name, r[0], r[1], len(got), hi-lo)
			}
		}
	}
}

func TestAChunkWithBadBytesFailsTheReadAndIsReportedNeverServed(t *testing.T) {
	s := serve(t, 16<<10)
	e := s.entry(t, "pkg/lib/two.js")
	ch := s.x.Chunks[e.Chunks[0]]
	s.store.Corrupt(packName, ch.Offset+ch.Stored/2, ch.Offset+ch.Stored/2+1)
	got, err := s.read(context.Background(), e, 0, 4096)
	if !errors.Is(err, ErrUnavailable) || len(got) != 0 {
		t.Fatalf("read over a bad frame: %d bytes, %v; want no bytes and ErrUnavailable", len(got), err)
	}
	if log, _ := os.ReadFile(filepath.Join(s.cache, "packs", packName+".verified")); strings.Contains(string(log), ch.Sha256) {
		t.Fatalf("the bad chunk is logged as verified in the cache: %s", log)
	}
	st := s.ct.Snapshot("ready")
	if st.Chunks.Failed != 1 || st.Failed[0].SHA256 != ch.Sha256 || !strings.Contains(st.Failed[0].Reason, "invalid") {
		t.Fatalf("status: %+v %+v", st.Chunks, st.Failed)
	}
	// Held: a read right after fails at once, without asking the store again.
	before := len(s.store.Requests())
	if _, err := s.read(context.Background(), e, 0, 10); err == nil || len(s.store.Requests()) != before {
		t.Fatalf("a held chunk was fetched again (%d requests) or read: %v", len(s.store.Requests())-before, err)
	}
	// Not sticky: once the hold is over and the store answers right, the read succeeds.
	s.ct.InvalidHold = 0
	s.store.Heal(packName)
	want, _ := os.ReadFile(filepath.Join(s.src, "pkg/lib/two.js"))
	if got, err := s.read(context.Background(), e, 0, 4096); err != nil || !bytes.Equal(got, want[:4096]) {
		t.Fatalf("read after heal: %v", err)
	}
}

func TestAFrameThatDecodesToOtherBytesThanItsNameFailsTheRead(t *testing.T) {
	s := serve(t, 16<<10)
	e := s.entry(t, "pkg/bin/tool")
	// The pack holds a good frame, but not of the bytes the index names: the name is another chunk's.
	c := e.Chunks[0]
	s.x.Chunks[c].Sha256 = s.x.Chunks[s.entry(t, "a/b/mid.js").Chunks[0]].Sha256
	got, err := s.read(context.Background(), e, 0, 100)
	if !errors.Is(err, ErrUnavailable) || len(got) != 0 || !strings.Contains(err.Error(), "invalid: got sha256") {
		t.Fatalf("read: %d bytes, %v; want no bytes and a SHA-256 mismatch", len(got), err)
	}
	if st := s.ct.Snapshot("ready"); st.Chunks.Failed != 1 || st.Chunks.Local != 0 {
		t.Fatalf("status %+v", st.Chunks)
	}
}

func TestConcurrentReadersOfAChunkFetchItOnce(t *testing.T) {
	s := serve(t, 16<<10)
	s.store.Delay(150 * time.Millisecond) // every reader arrives while the first fetch is under way
	e := s.entry(t, "a/b/c/big.bin")
	ch := s.x.Chunks[e.Chunks[1]]
	off := Segments(s.x, e)[1].off
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.read(context.Background(), e, off+int64(i*100), 100)
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// One GET of its frame (the reads also fetch the file's next chunks ahead, each once).
	mine, seen := 0, map[string]bool{}
	for _, r := range s.store.Requests() {
		if seen[r] {
			t.Fatalf("%s asked twice", r)
		}
		seen[r] = true
		if strings.Contains(r, "bytes="+strconv.FormatInt(ch.Offset, 10)+"-") {
			mine++
		}
	}
	if mine != 1 || len(seen) > 1+readAheadChunks {
		t.Fatalf("8 concurrent readers of one chunk sent %v, want one Range GET of its frame and at most %d ahead", s.store.Requests(), readAheadChunks)
	}
}

func TestPrefetchMakesEveryChunkLocalInGroupedGETsAndStatusSaysComplete(t *testing.T) {
	s := serve(t, 16<<10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.ct.Prefetch(ctx, PrefetchOptions{Workers: 3, GroupBytes: 256 << 10, GapBytes: 64 << 10, Passes: 2, RetryPause: 10 * time.Millisecond})
	select {
	case <-s.ct.Complete():
	case <-time.After(10 * time.Second):
		t.Fatalf("not complete: %+v", s.ct.Snapshot("ready").Chunks)
	}
	st := s.ct.Snapshot("ready")
	if st.State != "complete" || st.CompleteMs < 0 || st.Chunks.Local != len(s.x.Chunks) || st.Chunks.Ahead != len(s.x.Chunks) || st.Chunks.Failed != 0 {
		t.Fatalf("status %s %+v", st.State, st.Chunks)
	}
	if st.Requests >= len(s.x.Chunks)/2 {
		t.Fatalf("%d Range GETs for %d chunks: neighbouring frames were not grouped", st.Requests, len(s.x.Chunks))
	}
	// Every chunk in the cache is whole and verified: a fresh Content over it finds them all and is complete at once.
	again := s.content(t, s.cache)
	select {
	case <-again.Complete():
	default:
		t.Fatalf("a second mount over the filled cache is not complete: %+v", again.Snapshot("ready").Chunks)
	}
	// ... and reads from it alone: the store is gone.
	s.store.Close()
	e := s.entry(t, "a/b/c/big.bin")
	want, _ := os.ReadFile(filepath.Join(s.src, "a/b/c/big.bin"))
	got := make([]byte, len(want)+10)
	if n, err := again.ReadFile(context.Background(), Segments(s.x, e), e.Size, got, 0); err != nil || !bytes.Equal(got[:n], want) {
		t.Fatalf("read from the cache alone: %d bytes, %v", n, err)
	}
}

func TestBuildRefusesWhatATreeCannotHold(t *testing.T) {
	file := func(p string) filecas.Entry {
		var e filecas.Entry
		e.Path, e.Type = p, "file"
		return e
	}
	link := file("b")
	link.Link = "nowhere"
	for name, entries := range map[string][]filecas.Entry{
		"beneath a file":            {file("a"), file("a/b")},
		"a link to nothing":         {link},
		"a file after its children": {file("d/x"), file("d")},
	} {
		if _, err := Build(&filecas.Index{Version: 1, Entries: entries}); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

func TestDecodeRefusesANameLeadingOutsideTheTree(t *testing.T) {
	s := serve(t, 16<<10)
	s.x.Entries[3].Path = "../escape"
	var buf bytes.Buffer
	if err := filecas.Encode(&buf, s.x); err != nil {
		t.Fatal(err)
	}
	if _, err := filecas.Decode(&buf, filecas.DefaultLimits); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("decode: %v", err)
	}
}

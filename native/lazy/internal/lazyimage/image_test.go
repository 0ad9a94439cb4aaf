package lazyimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"snapflow/native/lazy/internal/cache"
	"snapflow/native/lazy/internal/fetch"
	"snapflow/native/lazy/internal/index"
	"snapflow/native/lazy/internal/testkit"
	"snapflow/native/lazy/internal/urlfile"
)

// An image of n 1000-byte chunks, each distinct, served by a real HTTP store.
func newImage(t *testing.T, n int) (*Image, *testkit.Store, []byte) {
	return newImageWith(t, n, nil)
}

// As newImage; `first` (when not nil) is written over the start of chunk 0 (a superblock).
func newImageWith(t *testing.T, n int, first []byte) (*Image, *testkit.Store, []byte) {
	t.Helper()
	idx := &index.Index{Version: 1, AvgChunk: 1024}
	chunks := map[string][]byte{}
	var whole []byte
	var digests []string
	for i := 0; i < n; i++ {
		data := bytes.Repeat([]byte(fmt.Sprintf("chunk %04d|", i)), 100)[:1000]
		if i == 0 && first != nil {
			copy(data, first)
		}
		sum := sha256.Sum256(data)
		sha := hex.EncodeToString(sum[:])
		chunks[sha] = data
		digests = append(digests, sha)
		idx.Chunks = append(idx.Chunks, index.Chunk{SHA256: sha, Offset: idx.Size, Size: 1000})
		idx.Size += 1000
		whole = append(whole, data...)
	}
	store := testkit.NewStore(chunks)
	t.Cleanup(store.Close)
	dir := t.TempDir()
	if err := store.WriteURLs(filepath.Join(dir, "urls.json"), digests, ""); err != nil {
		t.Fatal(err)
	}
	urls, err := urlfile.Open(filepath.Join(dir, "urls.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fetch.Fetcher{URLs: urls, Timeout: time.Second, Retries: -1}
	return New(context.Background(), idx, c, f, time.Now()), store, whole
}

func TestPrefetchTakesTheChunksAfterAnOnDemandReadFirstThenTheRest(t *testing.T) {
	img, store, whole := newImage(t, 20)
	p := make([]byte, 10)
	if _, err := img.ReadAt(context.Background(), p, 10_500); err != nil || !bytes.Equal(p, whole[10_500:10_510]) {
		t.Fatalf("read: %v", err)
	}
	img.Prefetch(context.Background(), PrefetchOptions{Workers: 1, Passes: 1})
	order := fetchOrder(img, store)
	// The first chunk before anything (its superblock says where a squashfs image's tables are; this is none).
	want := []int{10, 0, 11, 12, 13, 14, 1, 2}
	if fmt.Sprint(order[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("fetch order %v, want it to start %v", order, want)
	}
	s := img.Snapshot("ready")
	if s.State != "complete" || s.Chunks.OnDemand != 1 || s.Chunks.Ahead != 19 || s.CompleteMs < 0 || len(store.Gets()) != 20 {
		t.Fatalf("status %s %+v, %d GETs", s.State, s.Chunks, len(store.Gets()))
	}
}

func TestAReadSpanningChunksReturnsTheImageBytes(t *testing.T) {
	img, _, whole := newImage(t, 5)
	p := make([]byte, 2500)
	n, err := img.ReadAt(context.Background(), p, 900)
	if err != nil || n != 2500 || !bytes.Equal(p, whole[900:3400]) {
		t.Fatalf("n=%d err=%v", n, err)
	}
	// At the end of the image a read is short, not an error.
	n, err = img.ReadAt(context.Background(), p, 4000)
	if err != nil || n != 1000 || !bytes.Equal(p[:n], whole[4000:]) {
		t.Fatalf("tail read n=%d err=%v", n, err)
	}
}

func TestConcurrentReadersOfOneChunkShareOneFetch(t *testing.T) {
	img, store, _ := newImage(t, 3)
	done := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			p := make([]byte, 100)
			_, err := img.ReadAt(context.Background(), p, 1200)
			done <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(store.Gets()); n != 1 {
		t.Fatalf("%d GETs for one chunk", n)
	}
}

// The agent stops waiting for completion when the prefetcher has ended: the status must say so, with the chunk that
// could not be had still listed, and must not say so while the prefetcher runs.
func TestStatusSaysWhenPrefetchEndedWithAChunkStillFailed(t *testing.T) {
	img, store, _ := newImage(t, 6)
	missing := img.idx.Chunks[3].SHA256
	store.Missing(missing)
	if s := img.Snapshot("ready"); s.Prefetch != "pending" {
		t.Fatalf("before prefetch: %q", s.Prefetch)
	}
	img.Prefetch(context.Background(), PrefetchOptions{Workers: 2, Passes: 2, RetryPause: time.Millisecond})
	s := img.Snapshot("ready")
	if s.Prefetch != "done" || s.State != "ready" || s.Chunks.Local != 5 || len(s.Failed) != 1 || s.Failed[0].SHA256 != missing {
		t.Fatalf("after prefetch: %q %q local %d failed %+v", s.Prefetch, s.State, s.Chunks.Local, s.Failed)
	}
	off, _, _ := newImage(t, 1)
	off.Prefetch(context.Background(), PrefetchOptions{Workers: 0})
	if s := off.Snapshot("ready"); s.Prefetch != "off" {
		t.Fatalf("no prefetch: %q", s.Prefetch)
	}
}

func TestPrefetchTakesASquashfsImagesTablesRightAfterItsFirstChunk(t *testing.T) {
	// A superblock saying the tables run from inode_table_start 15,200 to bytes_used 17,900: chunks 15–17.
	sb := make([]byte, 96)
	copy(sb, "hsqs") // the squashfs magic
	binary.LittleEndian.PutUint64(sb[40:], 17_900)
	binary.LittleEndian.PutUint64(sb[64:], 15_200)
	img, store, _ := newImageWith(t, 20, sb)
	img.Prefetch(context.Background(), PrefetchOptions{Workers: 1, Passes: 1})
	order := fetchOrder(img, store)
	want := []int{0, 17, 16, 15, 1, 2}
	if fmt.Sprint(order[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("fetch order %v, want it to start %v", order, want)
	}
	if s := img.Snapshot("ready"); s.State != "complete" || s.Chunks.Ahead != 20 || len(store.Gets()) != 20 {
		t.Fatalf("status %s %+v, %d GETs", s.State, s.Chunks, len(store.Gets()))
	}
	// A superblock whose tables lie outside the image is not followed.
	if _, ok := index.SquashfsTables(sb, 17_000); ok {
		t.Fatal("tables past the image's end were taken")
	}
}

func TestReadCountsTheChunksReadersNeededWhoeverFetchedThem(t *testing.T) {
	img, _, _ := newImage(t, 5)
	img.Prefetch(context.Background(), PrefetchOptions{Workers: 1, Passes: 1}) // every chunk fetched ahead
	p := make([]byte, 2500)
	for i := 0; i < 2; i++ { // read twice: a chunk counts once
		if _, err := img.ReadAt(context.Background(), p, 900); err != nil {
			t.Fatal(err)
		}
	}
	s := img.Snapshot("ready")
	var spanned int64
	for _, c := range img.idx.Chunks[:4] { // [900, 3400) lies on the first four chunks
		spanned += c.Size
	}
	if s.Chunks.OnDemand != 0 || s.Chunks.Read != 4 || s.Bytes.Read != spanned || s.Bytes.Ahead != s.Bytes.Total {
		t.Fatalf("chunks %+v bytes %+v", s.Chunks, s.Bytes)
	}
}

func TestPrefetchTakesTheTablesTheIndexNamesWithoutWaitingForTheFirstChunk(t *testing.T) {
	// No superblock in the image: the index alone says where the tables are (chunks 15–17).
	img, store, _ := newImage(t, 20)
	img.idx.Tables = &index.Range{From: 15_200, To: 17_900}
	img.Prefetch(context.Background(), PrefetchOptions{Workers: 1, Passes: 1})
	order := fetchOrder(img, store)
	want := []int{0, 17, 16, 15, 1, 2}
	if fmt.Sprint(order[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("fetch order %v, want it to start %v", order, want)
	}
}

// fetchOrder is the index position of each chunk the store was asked for, in the order asked.
func fetchOrder(img *Image, store *testkit.Store) []int {
	pos := map[string]int{}
	for i, c := range img.idx.Chunks {
		pos[c.SHA256] = i
	}
	var order []int
	for _, g := range store.Gets() {
		order = append(order, pos[g])
	}
	return order
}

func TestTheSweepWaitsForQuietReadsButTheirNeighboursGoAtOnce(t *testing.T) {
	img, store, whole := newImage(t, 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { img.Prefetch(ctx, PrefetchOptions{Workers: 2, Passes: 1, Quiet: time.Hour}); close(done) }()
	p := make([]byte, 500)
	if _, err := img.ReadAt(ctx, p, 10_200); err != nil || !bytes.Equal(p, whole[10_200:10_700]) { // chunk 10, on demand
		t.Fatalf("read: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(store.Gets()) < 6 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // room for a sweep that should not run
	if got := slices.Sorted(slices.Values(fetchOrder(img, store))); fmt.Sprint(got) != "[0 10 11 12 13 14]" {
		t.Fatalf("fetched %v while reads were not quiet, want chunk 10, its four neighbours and the first chunk", got)
	}
	// The first chunk (the prefetcher took it for a superblock) suggests nothing when read; a reader going on through
	// the file finds the neighbour local, and its first read suggests the next ones.
	for _, off := range []int64{0, 11_000} {
		if _, err := img.ReadAt(ctx, p, off); err != nil {
			t.Fatal(err)
		}
	}
	for len(store.Gets()) < 7 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if order := fetchOrder(img, store); len(order) != 7 || order[6] != 15 || img.Snapshot("ready").Chunks.OnDemand != 1 {
		t.Fatalf("after reading chunk 11: fetched %v, status %+v", order, img.Snapshot("ready").Chunks)
	}
	cancel()
	<-done

	// Quiet once the wait has passed: the sweep fetches the rest.
	img2, store2, _ := newImage(t, 20)
	img2.Prefetch(context.Background(), PrefetchOptions{Workers: 2, Passes: 1, Quiet: 50 * time.Millisecond})
	if s := img2.Snapshot("ready"); s.State != "complete" || len(store2.Gets()) != 20 {
		t.Fatalf("after quiet: %s, %d GETs", s.State, len(store2.Gets()))
	}
}

func TestReadsThatNeverQuietenDelayTheSweepOnlyUpToItsBound(t *testing.T) {
	img, store, _ := newImage(t, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		img.Prefetch(ctx, PrefetchOptions{Workers: 2, Passes: 1, Quiet: time.Hour, QuietAtMost: 150 * time.Millisecond})
		close(done)
	}()
	// A reader that keeps fetching: one new chunk every 20 ms, far apart so no neighbour has come ahead of it.
	p := make([]byte, 10)
	for _, at := range []int64{19_000, 14_000, 9_000, 4_000} {
		if _, err := img.ReadAt(ctx, p, at); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the sweep still stood back after %v: %d of 20 chunks fetched", time.Since(start), len(store.Gets()))
	}
	if s := img.Snapshot("ready"); s.State != "complete" || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("%s after %v", s.State, time.Since(start))
	}
}

// A chunk whose stored bytes are wrong fails the reads that need it; once it has failed its hash, the next reads
// fail at once (invalidHold) instead of each fetching it again, and the prefetcher's later pass still tries it.
func TestReadsOfAChunkThatJustFailedItsHashFailAtOnce(t *testing.T) {
	img, store, _ := newImage(t, 3)
	bad := img.idx.Chunks[1].SHA256
	store.Corrupt(bad)
	p := make([]byte, 10)
	for i := 0; i < 5; i++ {
		if _, err := img.ReadAt(context.Background(), p, 1000+int64(i)*100); err == nil {
			t.Fatalf("read %d of a damaged chunk succeeded", i)
		}
	}
	if n := len(store.Gets()); n != 1 {
		t.Fatalf("%d GETs for 5 reads of a chunk that failed its hash: want 1", n)
	}
	store.Heal(bad)
	img.Prefetch(context.Background(), PrefetchOptions{Workers: 1, Passes: 2, RetryPause: time.Millisecond})
	if s := img.Snapshot("ready"); s.State != "complete" {
		t.Fatalf("the prefetcher did not fetch the healed chunk: %q, failed %+v", s.State, s.Failed)
	}
}

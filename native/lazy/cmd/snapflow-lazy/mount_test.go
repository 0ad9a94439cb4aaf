package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"snapflow/native/lazy/internal/lazyimage"
	"snapflow/native/lazy/internal/testkit"
)

func TestMountAnswersBeforeAnyChunkAndAFirstReadFetchesOnlyItsChunks(t *testing.T) {
	f := getFixture(t)
	store := testkit.NewStore(f.chunks)
	defer store.Close()
	m := startMount(t, f, store, "--prefetch", "0")
	if gets := store.Gets(); len(gets) != 0 {
		t.Fatalf("ready after %d chunk GETs, want 0", len(gets))
	}
	st, err := os.Stat(m.image())
	if err != nil || st.Size() != f.idx.Size {
		t.Fatalf("stat image: %v, size %d want %d", err, st.Size(), f.idx.Size)
	}
	// One page in the middle of chunk k: exactly chunk k is fetched, and the bytes are the image's.
	k := len(f.idx.Chunks) / 2
	c := f.idx.Chunks[k]
	off := c.Offset + c.Size/2&^4095
	got, err := preadNoReadahead(m.image(), off, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	want := f.chunks[c.SHA256][off-c.Offset:]
	if !bytes.Equal(got, want[:min(len(want), 4096)][:len(got)]) || len(got) == 0 {
		t.Fatal("bytes differ from the image")
	}
	if gets := store.Gets(); len(gets) != 1 || gets[0] != c.SHA256 {
		t.Fatalf("first read fetched %d chunks %v, want only chunk %d", len(gets), gets, k)
	}
	s := m.waitStatus(t, 2*time.Second, func(s lazyimage.Status) bool { return s.Chunks.OnDemand == 1 })
	if s.ReadyMs < 0 || s.Chunks.Ahead != 0 || s.Chunks.Local != 1 || s.CompleteMs != -1 {
		t.Fatalf("status %+v", s.Chunks)
	}
}

func TestSquashfsOverTheMountReadsEveryFileAndStillDoesOnceTheStoreIsGone(t *testing.T) {
	f := getFixture(t)
	store := testkit.NewStore(f.chunks)
	m := startMount(t, f, store, "--prefetch", "0") // no prefetch yet: measure what one file's first use costs
	kernel := mountSquashfs(t, m.image(), true)
	one := filepath.Join("pkg-003", "lib", "f02.js")
	compareFile(t, f.tree, kernel, one)
	s := m.waitStatus(t, 2*time.Second, func(s lazyimage.Status) bool { return s.Chunks.OnDemand > 0 })
	t.Logf("first file through kernel squashfs: %d of %d chunks, %d of %d bytes fetched", s.Chunks.OnDemand, s.Chunks.Total, s.Bytes.Fetched, s.Bytes.Total)
	if s.Bytes.Fetched > s.Bytes.Total/2 {
		t.Fatalf("reading one file fetched %d of %d bytes", s.Bytes.Fetched, s.Bytes.Total)
	}
	unmountSquashfs(t, kernel)
	m.stop(t)

	// Same cache, now with prefetch: the cached chunks count as local, the rest comes ahead.
	m2 := startMountOn(t, f, store, m.cache, "--prefetch", "4")
	s = m2.waitStatus(t, 20*time.Second, func(s lazyimage.Status) bool { return s.CompleteMs >= 0 })
	if s.State != "complete" || s.Chunks.Local != s.Chunks.Total || s.Chunks.Cached == 0 || len(s.Failed) != 0 {
		t.Fatalf("status after completion: %s %+v failed %v", s.State, s.Chunks, s.Failed)
	}
	store.Close() // from here on, any fetch would fail
	before := len(store.Gets())
	// Drop the image's pages so the reads below really reach the FUSE process.
	if _, err := preadNoReadahead(m2.image(), 0, 1, true); err != nil {
		t.Fatal(err)
	}
	for _, kernelMount := range []bool{true, false} {
		target := mountSquashfs(t, m2.image(), kernelMount)
		compareTree(t, f.tree, target)
		unmountSquashfs(t, target)
	}
	if after := len(store.Gets()); after != before {
		t.Fatalf("%d GETs after completion", after-before)
	}
	out, err := exec.Command(binary, "verify", "--index", f.indexPath, "--image", m2.image()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("verify through the mount: %v %s", err, out)
	}
}

func TestBadOrMissingChunkFailsTheReadWithEIOAndIsReported(t *testing.T) {
	f := getFixture(t)
	store := testkit.NewStore(f.chunks)
	defer store.Close()
	bad, gone := f.idx.Chunks[3], f.idx.Chunks[5]
	store.Corrupt(bad.SHA256)
	store.Missing(gone.SHA256)
	// No hold on a chunk that failed its hash (the lazyimage tests cover the hold): a read after the heal must fetch.
	m := startMount(t, f, store, "--prefetch", "0", "--retries", "1", "--invalid-hold", "0")
	for _, c := range []struct{ offset int64 }{{bad.Offset}, {gone.Offset}} {
		got, err := preadNoReadahead(m.image(), c.offset, 4096, true)
		if !errors.Is(err, syscall.EIO) || len(got) != 0 {
			t.Fatalf("read at %d: %d bytes, err %v; want EIO and no bytes", c.offset, len(got), err)
		}
	}
	s := m.waitStatus(t, 2*time.Second, func(s lazyimage.Status) bool { return s.Chunks.Failed == 2 })
	reasons := map[string]string{}
	for _, fl := range s.Failed {
		reasons[fl.SHA256] = fl.Reason
	}
	if !strings.Contains(reasons[bad.SHA256], "invalid") || !strings.Contains(reasons[gone.SHA256], "missing") {
		t.Fatalf("failed chunks reported as %v", s.Failed)
	}
	// A failure is not sticky: once the store serves the chunk, the same read succeeds with the right bytes.
	store.Heal(bad.SHA256)
	got, err := preadNoReadahead(m.image(), bad.Offset, 4096, true)
	if err != nil || !bytes.Equal(got, f.chunks[bad.SHA256][:len(got)]) {
		t.Fatalf("read after heal: %v", err)
	}
	s = m.waitStatus(t, 2*time.Second, func(s lazyimage.Status) bool { return s.Chunks.Failed == 1 })
	if s.Failed[0].SHA256 != gone.SHA256 {
		t.Fatalf("still failed: %v", s.Failed)
	}
}

func TestStalledStoreMidPrefetchIsSurvived(t *testing.T) {
	f := getFixture(t)
	store := testkit.NewStore(f.chunks)
	defer store.Close()
	// Every fourth chunk hangs on its first request, far longer than the 500 ms attempt deadline.
	stalled := 0
	for i, c := range f.idx.Distinct() {
		if i%4 == 1 {
			store.Stall(c.SHA256, 1, time.Minute)
			stalled++
		}
	}
	m := startMount(t, f, store, "--prefetch", "4")
	s := m.waitStatus(t, 30*time.Second, func(s lazyimage.Status) bool { return s.CompleteMs >= 0 })
	if s.FetchAttempts < s.Chunks.Total+stalled || len(s.Failed) != 0 {
		t.Fatalf("attempts %d for %d chunks (%d stalled), failed %v", s.FetchAttempts, s.Chunks.Total, stalled, s.Failed)
	}
	out, err := exec.Command(binary, "verify", "--index", f.indexPath, "--cache", m.cache).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("verify cache: %v %s", err, out)
	}
}

func TestSIGTERMMidPrefetchLeavesNoMount(t *testing.T) {
	f := getFixture(t)
	store := testkit.NewStore(f.chunks)
	defer store.Close()
	for _, c := range f.idx.Distinct() {
		store.Stall(c.SHA256, 100, time.Minute) // the prefetch never gets anywhere
	}
	m := startMount(t, f, store, "--prefetch", "4", "--fetch-timeout", "30s")
	time.Sleep(300 * time.Millisecond)
	if !mounted(m.mnt) {
		t.Fatal("not mounted")
	}
	start := time.Now()
	m.stop(t) // asserts exit 0 and no mount left
	t.Logf("exited %v after SIGTERM", time.Since(start))
	if s := m.status(t); s.State != "stopped" {
		t.Fatalf("final state %q", s.State)
	}
}

func TestSIGTERMWithSquashfsStillMountedOnTopDetachesTheMount(t *testing.T) {
	f := getFixture(t)
	store := testkit.NewStore(f.chunks)
	defer store.Close()
	m := startMount(t, f, store, "--prefetch", "0")
	kernel := mountSquashfs(t, m.image(), true)
	compareFile(t, f.tree, kernel, filepath.Join("pkg-000", "lib", "f00.js"))
	m.stop(t) // the squashfs holds the file open: the FUSE mount must still leave the mount table
	// The loop-mounted squashfs now reads EIO, never stale or wrong bytes.
	rel := filepath.Join("pkg-001", "lib", "f06.js")
	got, err := os.ReadFile(filepath.Join(kernel, rel))
	if err == nil {
		want, _ := os.ReadFile(filepath.Join(f.tree, rel))
		if !bytes.Equal(got, want) {
			t.Fatal("wrong bytes after the mount was detached")
		}
	} else if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read after detach: %v, want EIO", err)
	}
}

func compareFile(t *testing.T, srcRoot, mountRoot, rel string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(srcRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(mountRoot, rel))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s through the mount: %v (equal=%v)", rel, err, bytes.Equal(got, want))
	}
}

func compareTree(t *testing.T, srcRoot, mountRoot string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(srcRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(srcRoot, p)
		compareFile(t, srcRoot, mountRoot, rel)
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("walk: %v, %d files", err, n)
	}
}

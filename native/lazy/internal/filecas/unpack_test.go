package filecas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// sourceTree makes a tree with every kind of entry a restore makes: nested directories with their own modes, small
// and multi-chunk files, two files of the same content, a symlink out of the tree, hard links across directories, a
// FIFO, a sparse file, a file that is all hole, an empty file, nanosecond mtimes.
func sourceTree(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "src")
	rng := rand.New(rand.NewSource(7))
	random := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "d"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a/small.txt"), []byte("hello, world\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "a/b/big.bin"), random(100_000), 0o640))
	same := random(9000)
	must(os.WriteFile(filepath.Join(dir, "a/b/c/same-1"), same, 0o600))
	must(os.WriteFile(filepath.Join(dir, "d/same-2"), same, 0o755))
	must(os.WriteFile(filepath.Join(dir, "d/empty"), nil, 0o644))
	must(os.WriteFile(filepath.Join(dir, "d/linked"), []byte("one inode, two names"), 0o644))
	must(os.Link(filepath.Join(dir, "d/linked"), filepath.Join(dir, "a/linked-too")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "a/outside")))
	must(os.Symlink("../d/empty", filepath.Join(dir, "a/b/relative")))
	must(unix.Mkfifo(filepath.Join(dir, "d/fifo"), 0o640))
	f, err := os.Create(filepath.Join(dir, "d/sparse.img"))
	must(err)
	_, err = f.WriteAt(random(70_000), 1<<20)
	must(err)
	must(f.Truncate(4 << 20))
	must(f.Close())
	must(os.WriteFile(filepath.Join(dir, "d/hole-only"), nil, 0o644))
	must(os.Truncate(filepath.Join(dir, "d/hole-only"), 2<<20))
	must(os.Chmod(filepath.Join(dir, "a/b"), 0o750))
	// Nanosecond mtimes, directories last (their children moved them).
	at := time.Unix(1_700_000_000, 123_456_789)
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error { paths = append(paths, p); return err })
	for i := len(paths) - 1; i >= 1; i-- {
		ts := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(at.UnixNano() + int64(i)*1_000_003)}
		must(unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW))
	}
	return dir
}

// described is what a tree's walk says of each entry: what the restore must reproduce.
type described struct {
	kind   uint32
	mode   uint32
	size   int64
	mtime  int64
	target string
	sha    string
	group  string // the first name of its inode (hard links)
	alloc  int64
}

func describe(t *testing.T, dir string) map[string]described {
	out := map[string]described{}
	first := map[[2]uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := described{kind: st.Mode & unix.S_IFMT, mode: st.Mode & 0o7777, mtime: st.Mtim.Nano(), alloc: st.Blocks * 512}
		switch e.kind {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			e.sha, e.size = hex.EncodeToString(s[:]), st.Size
			key := [2]uint64{st.Dev, st.Ino}
			if _, ok := first[key]; !ok {
				first[key] = rel
			}
			e.group = first[key]
		case unix.S_IFLNK:
			e.target, _ = os.Readlink(p)
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, want, got string) {
	t.Helper()
	w, g := describe(t, want), describe(t, got)
	if len(w) != len(g) {
		t.Errorf("%d entries, want %d", len(g), len(w))
	}
	for p, we := range w {
		ge, ok := g[p]
		if !ok {
			t.Errorf("%s: missing", p)
			continue
		}
		// A sparse file's holes stay holes: no more allocated than the source (plus a block of rounding).
		if we.alloc < we.size && ge.alloc > we.alloc+4096 {
			t.Errorf("%s: %d bytes allocated, the source has %d (holes filled)", p, ge.alloc, we.alloc)
		}
		we.alloc, ge.alloc = 0, 0
		if we != ge {
			t.Errorf("%s: %+v, want %+v", p, ge, we)
		}
	}
}

func emptyRoot(t *testing.T) string {
	root := filepath.Join(t.TempDir(), "staging")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

func options(root string, s *store, b *built) UnpackOptions {
	return UnpackOptions{Root: root, Packs: s.urls(b), Walk: true, Idle: 2 * time.Second, Retries: 2, Concurrency: 3}
}

func errCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	return e
}

func TestUnpackMakesTheTreeItsIndexDescribes(t *testing.T) {
	unix.Umask(0)
	src := sourceTree(t)
	for _, packs := range []int{1, 3, -1} {
		// -1: one pack, sparse files indexed dense (their zero chunks, one shared chunk, come before their turn)
		b := buildWith(t, src, 4096, max(packs, 1), packs < 0)
		s := serve(t, b.packs)
		root := emptyRoot(t)
		res, err := Unpack(context.Background(), roundTrip(t, b.x), options(root, s, b))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Equal || res.Walked == nil {
			t.Fatalf("packs %d: not equal: %+v", packs, res)
		}
		sameTree(t, src, root)
		if res.Chunks != int64(len(b.x.Chunks)) {
			t.Errorf("packs %d: %d chunks fetched, the index has %d distinct", packs, res.Chunks, len(b.x.Chunks))
		}
		// Spread over three packs round-robin, a file's chunks come from several requests: some arrive early and
		// are hashed by reading them back.
		if packs == 3 && res.RereadBytes == 0 {
			t.Errorf("packs 3: nothing was read back: %+v", res)
		}
		t.Logf("packs %d: %+v", packs, res)
	}
}

func TestUnpackFetchesASharedChunkOnceAndCoalescesRanges(t *testing.T) {
	unix.Umask(0)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	same := bytes.Repeat([]byte("shared "), 2000)
	for _, name := range []string{"one", "two", "three"} {
		os.WriteFile(filepath.Join(src, name), same, 0o644)
	}
	b := build(t, src, 4096, 1)
	s := serve(t, b.packs)
	root := emptyRoot(t)
	res, err := Unpack(context.Background(), roundTrip(t, b.x), options(root, s, b))
	if err != nil {
		t.Fatal(err)
	}
	uses := 0
	for _, e := range b.x.Entries {
		uses += len(e.Chunks)
	}
	if !res.Equal || res.Chunks != int64(len(b.x.Chunks)) || uses != 3*len(b.x.Chunks) {
		t.Fatalf("%d chunks fetched for %d distinct, %d uses: %+v", res.Chunks, len(b.x.Chunks), uses, res)
	}
	if res.FetchedBytes != b.x.Packs[0].Bytes {
		t.Errorf("fetched %d bytes, the pack holds %d: a chunk was fetched twice", res.FetchedBytes, b.x.Packs[0].Bytes)
	}
	sameTree(t, src, root)

	// Many small files: their chunks lie next to each other in the pack and come in few requests.
	many := filepath.Join(t.TempDir(), "many")
	os.MkdirAll(many, 0o755)
	for i := range 200 {
		os.WriteFile(filepath.Join(many, strings.Repeat("f", 1+i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))), []byte(strings.Repeat("x", i+1)), 0o644)
	}
	b = build(t, many, 4096, 1)
	s = serve(t, b.packs)
	res, err = Unpack(context.Background(), roundTrip(t, b.x), options(emptyRoot(t), s, b))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Equal || res.Chunks != 200 || res.Requests >= res.Chunks || s.requests.Load() != res.Requests {
		t.Fatalf("%d requests (the server saw %d) for %d chunks: %+v", res.Requests, s.requests.Load(), res.Chunks, res)
	}
	t.Logf("%d chunks in %d requests", res.Chunks, res.Requests)
}

func TestUnpackRefusesAChunkThatIsNotItsName(t *testing.T) {
	unix.Umask(0)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "good"), []byte("the good bytes"), 0o644)
	os.WriteFile(filepath.Join(src, "victim"), []byte("what was backed up"), 0o644)
	b := build(t, src, 4096, 1)
	// The pack's frame for victim's chunk replaced by a frame of other bytes of the same length.
	var victim *Chunk
	for _, e := range b.x.Entries {
		if e.Path == "victim" {
			victim = &b.x.Chunks[e.Chunks[0]]
		}
	}
	enc, _ := zstd.NewWriter(nil)
	evil := enc.EncodeAll([]byte("what the liar sent"), nil)
	p := b.packs["pack-0"]
	forged := append(append(append([]byte{}, p[:victim.Offset]...), evil...), p[victim.Offset+victim.Stored:]...)
	shift := int64(len(evil)) - victim.Stored
	for i := range b.x.Chunks {
		if b.x.Chunks[i].Offset > victim.Offset {
			b.x.Chunks[i].Offset += shift
		}
	}
	victim.Stored = int64(len(evil))
	b.packs["pack-0"], b.x.Packs[0].Bytes = forged, int64(len(forged))
	s := serve(t, b.packs)
	root := emptyRoot(t)
	_, err := Unpack(context.Background(), roundTrip(t, b.x), options(root, s, b))
	e := errCode(t, err, "verify_failed")
	if !strings.Contains(e.Message, victim.Sha256) || !strings.Contains(e.Message, "victim") {
		t.Errorf("the message names neither the chunk nor its file: %s", e.Message)
	}
	// Nothing of it was written: its file was never made.
	if _, err := os.Lstat(filepath.Join(root, "victim")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("victim was made from a chunk that failed its check: %v", err)
	}
}

func TestUnpackRefusesNamesOutOfTheTree(t *testing.T) {
	unix.Umask(0)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(filepath.Join(src, "a"), 0o755)
	os.WriteFile(filepath.Join(src, "a/x"), []byte("content"), 0o644)
	b := build(t, src, 4096, 1)

	// '..' in a name: Decode (Validate) refuses the index before anything is made.
	bad := *b.x
	bad.Entries = append([]Entry{}, b.x.Entries...)
	bad.Entries[1].Path = "../x"
	var buf bytes.Buffer
	Encode(&buf, &bad)
	_, err := Decode(&buf, DefaultLimits)
	errCode(t, err, "path_outside_root")

	// A symlink where the directory was, out to a directory beside the root: the file beneath it is refused and
	// nothing is written there.
	outside := t.TempDir()
	trick := *b.x
	trick.Entries = append([]Entry{}, b.x.Entries...)
	trick.Entries[0].Type, trick.Entries[0].Target = "symlink", outside
	s := serve(t, b.packs)
	root := emptyRoot(t)
	_, err = Unpack(context.Background(), roundTrip(t, &trick), options(root, s, b))
	errCode(t, err, "path_outside_root")
	if names, _ := os.ReadDir(outside); len(names) > 0 {
		t.Errorf("written outside the root: %v", names)
	}
	if s.requests.Load() != 0 {
		t.Errorf("%d requests made for an index the tree pass refuses", s.requests.Load())
	}
}

func TestUnpackAnswersAFileWhoseHashIsNotItsEntrysAsADifference(t *testing.T) {
	unix.Umask(0)
	src := sourceTree(t)
	b := build(t, src, 4096, 1)
	for i := range b.x.Entries {
		if b.x.Entries[i].Path == "a/b/big.bin" {
			b.x.Entries[i].Sha256 = strings.Repeat("0", 64)
		}
	}
	s := serve(t, b.packs)
	res, err := Unpack(context.Background(), roundTrip(t, b.x), options(emptyRoot(t), s, b))
	if err != nil {
		t.Fatal(err)
	}
	if res.Equal || res.Counts.Changed != 1 || res.Differences[0].Path != "a/b/big.bin" || res.Differences[0].Fields[0].Name != "sha256" {
		t.Fatalf("%+v", res)
	}
}

func TestUnpackNeedsEveryPacksURL(t *testing.T) {
	src := sourceTree(t)
	b := build(t, src, 4096, 2)
	s := serve(t, b.packs)
	o := options(emptyRoot(t), s, b)
	delete(o.Packs, "pack-1")
	_, err := Unpack(context.Background(), roundTrip(t, b.x), o)
	if e := errCode(t, err, "bad_request"); e.Field != "packs" || !strings.Contains(e.Message, "pack-1") {
		t.Fatalf("%+v", e)
	}
}

func TestUnpackResumesAStalledRequest(t *testing.T) {
	unix.Umask(0)
	src := sourceTree(t)
	b := build(t, src, 4096, 1)
	s := serve(t, b.packs)
	// The first two answers send half their range and go silent for 10 s.
	s.stall = func(n int64) time.Duration {
		if n <= 2 {
			return 10 * time.Second
		}
		return 0
	}
	o := options(emptyRoot(t), s, b)
	o.Idle = 300 * time.Millisecond
	started := time.Now()
	res, err := Unpack(context.Background(), roundTrip(t, b.x), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Equal || res.Requests <= int64(res.Ranges) {
		t.Fatalf("%d requests for %d ranges: %+v", res.Requests, res.Ranges, res)
	}
	if time.Since(started) > 8*time.Second {
		t.Errorf("a stalled request was waited on, not abandoned")
	}
	sameTree(t, src, o.Root)
}

func TestUnpackHashesAFileLargerThanARequestAsItIsWritten(t *testing.T) {
	unix.Umask(0)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	big := make([]byte, 400_000)
	rand.New(rand.NewSource(3)).Read(big)
	os.WriteFile(filepath.Join(src, "big"), big, 0o644)
	os.WriteFile(filepath.Join(src, "small"), []byte("after it"), 0o644)
	b := build(t, src, 4096, 1)
	s := serve(t, b.packs)
	o := options(emptyRoot(t), s, b)
	o.Span = 16 << 10 // ~25 requests for the big file's ~100 chunks, on three fetchers
	res, err := Unpack(context.Background(), roundTrip(t, b.x), o)
	if err != nil {
		t.Fatal(err)
	}
	// Its requests are one chain on one fetcher: its chunks come in order, none is read back.
	if !res.Equal || res.Ranges < 20 || res.RereadBytes != 0 {
		t.Fatalf("%d ranges, %d bytes read back: %+v", res.Ranges, res.RereadBytes, res)
	}
	sameTree(t, src, o.Root)
}

package filecas

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	fastcdc "github.com/jotfs/fastcdc-go"
	"github.com/klauspost/compress/zstd"

	"snapflow/native/lazy/internal/pack"
)

// avg keeps the test trees small and still cut into several chunks: min 4 KiB, max 64 KiB.
const avg = 16 << 10

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func random(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// tree writes the cases a backup meets: a file of many chunks, small files (one a copy of another), an empty file,
// a log the selection leaves out, a symlink, hard links, a FIFO, a sparse file and one that is all hole.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "d/sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "big.bin"), random(1, 300_000), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "d/sub/copy.txt"), []byte("hello"), 0o600))
	must(t, os.WriteFile(filepath.Join(root, "d/mid.js"), bytes.Repeat([]byte("const x = require('y');\n"), 3000), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "empty"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(root, "d/<&>\"é😀.txt"), []byte("escaped"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "d-x"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "d-x/！full"), []byte("after d/ in walk order"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "x.log"), []byte("left out"), 0o644))
	must(t, os.Symlink("../a.txt", filepath.Join(root, "d/link")))
	must(t, os.WriteFile(filepath.Join(root, "d/first"), random(2, 40_000), 0o644))
	must(t, os.Link(filepath.Join(root, "d/first"), filepath.Join(root, "d/sub/second")))
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	if os.Geteuid() == 0 { // a device node (root only): listed as "other", never read
		must(t, syscall.Mknod(filepath.Join(root, "null-dev"), syscall.S_IFCHR|0o644, 1<<8|3))
	}
	f, err := os.Create(filepath.Join(root, "sparse.img"))
	must(t, err)
	_, err = f.WriteAt(random(3, 20_000), 1<<20)
	must(t, err)
	must(t, f.Truncate(4<<20))
	must(t, f.Close())
	h, err := os.Create(filepath.Join(root, "hole-only"))
	must(t, err)
	must(t, h.Truncate(2<<20))
	must(t, h.Close())
	return root
}

var selection = &pack.Selection{
	Patterns: []pack.Pattern{{Pattern: "*.log", Re: `^(?:.*/)?[^/]*\.log$`}},
	Record:   &pack.Record{Excludes: []string{"*.log"}},
}

// memSink is the pack's way out in these tests: it keeps the bytes and counts the writes.
type memSink struct {
	bytes.Buffer
	writes int
	closed bool
}

func (s *memSink) Write(b []byte) (int, error) { s.writes++; return s.Buffer.Write(b) }
func (s *memSink) Close() error                { s.closed = true; return nil }

type made struct {
	res      Result
	index    *Index
	indexRaw []byte
	manifest []byte
	pack     []byte
	opened   []string
	sink     *memSink
	dir      string
}

var hookMu sync.Mutex

// backup runs a pass over root (base: the index file of an earlier one) and reads back what it wrote.
func backup(t *testing.T, root, name string, base *BaseSource) (made, error) {
	t.Helper()
	hookMu.Lock()
	defer hookMu.Unlock()
	var m made
	testOpened = func(rel string) { m.opened = append(m.opened, rel) }
	defer func() { testOpened = func(string) {} }()
	m.dir = t.TempDir()
	m.sink = &memSink{}
	opts := Options{Root: root, Manifest: filepath.Join(m.dir, "m.json"), Index: filepath.Join(m.dir, "index.zst"), Name: name, AvgChunk: avg, Selection: selection, Base: base}
	res, err := Backup(opts, m.sink)
	if err != nil {
		if left, _ := os.ReadDir(m.dir); len(left) != 0 {
			t.Errorf("a failed pass left %v behind", left)
		}
		return m, err
	}
	m.res, m.pack = res, m.sink.Bytes()
	m.manifest, err = os.ReadFile(opts.Manifest)
	must(t, err)
	m.indexRaw, err = os.ReadFile(opts.Index)
	must(t, err)
	m.index, err = Decode(bytes.NewReader(m.indexRaw), DefaultLimits)
	must(t, err)
	if sum(m.indexRaw) != res.Index.Sha256 || int64(len(m.indexRaw)) != res.Index.Bytes || len(m.index.Chunks) != res.Index.Chunks {
		t.Fatalf("the result's index %+v is not the file written", res.Index)
	}
	// Written as its entries were made, the index is what Encode writes for it.
	var again bytes.Buffer
	must(t, Encode(&again, m.index))
	if want, got := unzstd(t, again.Bytes()), unzstd(t, m.indexRaw); !bytes.Equal(got, want) {
		t.Fatalf("the index written is not Encode's:\n%s\n%s", got, want)
	}
	return m, nil
}

func unzstd(t *testing.T, b []byte) []byte {
	t.Helper()
	d, err := zstd.NewReader(nil)
	must(t, err)
	defer d.Close()
	out, err := d.DecodeAll(b, nil)
	must(t, err)
	return out
}

// baseOf names m's index as the base of the next pass (its kept file).
func baseOf(m made) *BaseSource {
	return &BaseSource{File: filepath.Join(m.dir, "index.zst"), Sha256: m.res.Index.Sha256}
}

// packManifest is pack's manifest of the same tree, with the same selection.
func packManifest(t *testing.T, root string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.json")
	_, err := pack.Run(pack.Options{Root: root, Manifest: path, Selection: selection}, io.Discard)
	must(t, err)
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

// restore checks the index against the packs as a restore would read them: every chunk's frame decodes to bytes
// whose SHA-256 is its name, and each file's chunks laid over its data regions (zeros between) read back as its
// SHA-256. Answers each file's content.
func restoreInMemory(t *testing.T, x *Index, packs map[string][]byte) map[string][]byte {
	t.Helper()
	dec, err := zstd.NewReader(nil)
	must(t, err)
	defer dec.Close()
	chunk := make([][]byte, len(x.Chunks))
	for i, c := range x.Chunks {
		p := x.Packs[c.Pack]
		body := packs[p.Name]
		if body == nil || sum(body) != p.Sha256 || int64(len(body)) != p.Bytes {
			t.Fatalf("pack %s: not the bytes the index names", p.Name)
		}
		raw, err := dec.DecodeAll(body[c.Offset:c.Offset+c.Stored], nil)
		must(t, err)
		if sum(raw) != c.Sha256 || int64(len(raw)) != c.Size {
			t.Fatalf("chunk %d: its frame decodes to %d bytes of sha256 %s, not %s", i, len(raw), sum(raw), c.Sha256)
		}
		chunk[i] = raw
	}
	files := map[string][]byte{}
	for _, e := range x.Entries {
		if e.Type != "file" || e.Link != "" {
			continue
		}
		var data []byte
		for _, c := range e.Chunks {
			data = append(data, chunk[c]...)
		}
		content := make([]byte, e.Size)
		regions := e.Data
		if len(regions) == 0 && e.Holes != e.Size {
			regions = [][2]int64{{0, e.Size}}
		}
		for _, r := range regions {
			copy(content[r[0]:r[0]+r[1]], data[:r[1]])
			data = data[r[1]:]
		}
		if sum(content) != e.Sha256 {
			t.Fatalf("%s: its chunks read back as %s, not %s", e.Path, sum(content), e.Sha256)
		}
		files[e.Path] = content
	}
	return files
}

func entry(x *Index, path string) *Entry {
	for i := range x.Entries {
		if x.Entries[i].Path == path {
			return &x.Entries[i]
		}
	}
	return nil
}

func codeOf(err error) string {
	var known *pack.Error
	if errors.As(err, &known) {
		return known.Code
	}
	return ""
}

func TestAFullBackupWritesPacksManifestAndADecodableIndex(t *testing.T) {
	root := tree(t)
	m, err := backup(t, root, "s1", nil)
	must(t, err)
	if want := packManifest(t, root); !bytes.Equal(m.manifest, want) {
		t.Fatalf("the manifest differs from pack's:\n%s\n%s", m.manifest, want)
	}
	// The index and the selection record the pass answered make its manifest again, byte for byte.
	remade := filepath.Join(t.TempDir(), "again.json")
	made, err := m.index.WriteManifest(remade, m.res.Selection)
	must(t, err)
	if raw, err := os.ReadFile(remade); err != nil || !bytes.Equal(raw, m.manifest) || made.JSONSha256 != m.res.JSONSha256 || m.res.Selection == nil {
		t.Fatalf("the manifest made from the index differs (selection %+v):\n%s\n%s", m.res.Selection, raw, m.manifest)
	}
	files := restoreInMemory(t, m.index, map[string][]byte{"s1": m.pack})
	if !bytes.Equal(files["big.bin"], random(1, 300_000)) || len(entry(m.index, "big.bin").Chunks) < 5 {
		t.Fatalf("big.bin: %d chunks", len(entry(m.index, "big.bin").Chunks))
	}
	if a, c := entry(m.index, "a.txt"), entry(m.index, "d/sub/copy.txt"); !slices.Equal(a.Chunks, c.Chunks) {
		t.Fatalf("the same content, two chunk lists: %v %v", a.Chunks, c.Chunks)
	}
	// a.txt is one chunk: the index writes its hash once, in the chunk table (format.go, version 3); decoded, the
	// entry has it, as the manifest does.
	if a := entry(m.index, "a.txt"); len(a.Chunks) != 1 || a.Sha256 == "" || bytes.Count(unzstd(t, m.indexRaw), []byte(a.Sha256)) != 1 || !bytes.Contains(m.manifest, []byte(a.Sha256)) {
		t.Fatalf("a.txt: %d chunks, hash %q written %d times in the index", len(a.Chunks), a.Sha256, bytes.Count(unzstd(t, m.indexRaw), []byte(a.Sha256)))
	}
	// Each dense file is cut where FastCDC cuts its content, small ones included (the same content, the same chunks,
	// whichever way a pass read it).
	for path, content := range files {
		e := entry(m.index, path)
		if e.Holes > 0 || len(content) == 0 {
			continue
		}
		c, err := fastcdc.NewChunker(bytes.NewReader(content), fastcdc.Options{AverageSize: avg, MinSize: avg / 4, MaxSize: avg * 4})
		must(t, err)
		var want []int64
		for ch, err := c.Next(); err == nil; ch, err = c.Next() {
			want = append(want, int64(ch.Length))
		}
		var got []int64
		for _, i := range e.Chunks {
			got = append(got, m.index.Chunks[i].Size)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: chunks of %v, FastCDC cuts %v", path, got, want)
		}
	}
	if e := entry(m.index, "fifo"); e.Type != "other" || e.Node != "fifo" {
		t.Fatalf("fifo: %+v", e)
	}
	if e := entry(m.index, "null-dev"); os.Geteuid() == 0 && (e.Type != "other" || e.Node != "char" || slices.Contains(m.opened, "null-dev")) {
		t.Fatalf("null-dev: %+v", e)
	}
	if entry(m.index, "x.log") != nil {
		t.Fatal("the selection's exclusion is in the index")
	}
	if m.res.NewChunks != len(m.index.Chunks) || m.res.Pack == nil || m.res.Pack.Bytes != int64(len(m.pack)) || !m.sink.closed {
		t.Fatalf("result %+v for %d chunks, %d pack bytes", m.res, len(m.index.Chunks), len(m.pack))
	}
	// The same tree makes the same pack, byte for byte, however the frames were compressed.
	again, err := backup(t, root, "s1", nil)
	must(t, err)
	if !bytes.Equal(again.pack, m.pack) || !bytes.Equal(again.indexRaw, m.indexRaw) {
		t.Fatal("a second pass over the same tree made another pack or index")
	}
}

func TestAnIncrementalReadsOnlyTheChangedFileAndStoresOnlyItsNewChunks(t *testing.T) {
	root := tree(t)
	first, err := backup(t, root, "s1", nil)
	must(t, err)
	// Change 4 KiB in the middle of big.bin: FastCDC cuts anew around it only.
	big := random(1, 300_000)
	copy(big[150_000:], random(9, 4096))
	must(t, os.WriteFile(filepath.Join(root, "big.bin"), big, 0o644))
	m, err := backup(t, root, "s2", baseOf(first))
	must(t, err)
	if !slices.Equal(m.opened, []string{"big.bin"}) || m.res.Read != (Counts{1, 300_000}) {
		t.Fatalf("opened %v, read %+v", m.opened, m.res.Read)
	}
	if m.res.Reused.Files != first.res.Read.Files-1 {
		t.Fatalf("reused %+v of %d files", m.res.Reused, first.res.Read.Files)
	}
	if want := packManifest(t, root); !bytes.Equal(m.manifest, want) {
		t.Fatal("the incremental's manifest differs from pack's")
	}
	known := map[string]bool{}
	for _, c := range first.index.Chunks {
		known[c.Sha256] = true
	}
	fresh := 0
	for _, c := range m.index.Chunks {
		if !known[c.Sha256] {
			fresh++
			if m.index.Packs[c.Pack].Name != "s2" {
				t.Fatalf("a new chunk lives in %s", m.index.Packs[c.Pack].Name)
			}
		} else if m.index.Packs[c.Pack].Name != "s1" {
			t.Fatalf("a known chunk was stored again")
		}
	}
	if fresh == 0 || fresh != m.res.NewChunks || fresh > 3 || int64(len(m.pack)) > 3*4*avg {
		t.Fatalf("%d new chunks (result %d), %d pack bytes", fresh, m.res.NewChunks, len(m.pack))
	}
	files := restoreInMemory(t, m.index, map[string][]byte{"s1": first.pack, "s2": m.pack})
	if !bytes.Equal(files["big.bin"], big) {
		t.Fatal("big.bin does not read back as changed")
	}
}

func TestAnIncrementalDropsADeletedFileAndThePackNothingReferences(t *testing.T) {
	root := tree(t)
	s1, err := backup(t, root, "s1", nil)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "d/added"), random(5, 50_000), 0o644))
	s2, err := backup(t, root, "s2", baseOf(s1))
	must(t, err)
	if !slices.Equal(s2.opened, []string{"d/added"}) || len(s2.index.Packs) != 2 {
		t.Fatalf("opened %v, packs %+v", s2.opened, s2.index.Packs)
	}
	must(t, os.Remove(filepath.Join(root, "d/added")))
	must(t, os.WriteFile(filepath.Join(root, "d/other"), random(6, 30_000), 0o644))
	s3, err := backup(t, root, "s3", baseOf(s2))
	must(t, err)
	if !slices.Equal(s3.opened, []string{"d/other"}) || entry(s3.index, "d/added") != nil {
		t.Fatalf("opened %v", s3.opened)
	}
	// d/added's chunks were all s2 held: neither they nor s2 are carried.
	names := []string{}
	for _, p := range s3.index.Packs {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"s1", "s3"}) || len(s3.index.Chunks) != len(s1.index.Chunks)+s3.res.NewChunks {
		t.Fatalf("packs %v, %d chunks (s1 %d, new %d)", names, len(s3.index.Chunks), len(s1.index.Chunks), s3.res.NewChunks)
	}
	// The result names the same packs as the index, with their sizes: what the Worker keeps and checks.
	if got := s3.res.Packs; len(got) != 2 || got[0] != (PackRef{"s1", int64(len(s1.pack))}) || got[1] != (PackRef{"s3", int64(len(s3.pack))}) {
		t.Fatalf("result packs %+v", got)
	}
	restoreInMemory(t, s3.index, map[string][]byte{"s1": s1.pack, "s3": s3.pack})
}

func TestHardLinksCarryTheirChunksOnTheFirstName(t *testing.T) {
	root := tree(t)
	s1, err := backup(t, root, "s1", nil)
	must(t, err)
	first, second := entry(s1.index, "d/first"), entry(s1.index, "d/sub/second")
	if len(first.Chunks) == 0 || second.Link != "d/first" || len(second.Chunks) != 0 || second.Size != first.Size {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	// Written through the later name: the inode's first name is what is read.
	f, err := os.OpenFile(filepath.Join(root, "d/sub/second"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte("more"))
	must(t, err)
	must(t, f.Close())
	s2, err := backup(t, root, "s2", baseOf(s1))
	must(t, err)
	if !slices.Equal(s2.opened, []string{"d/first"}) || entry(s2.index, "d/sub/second").Link != "d/first" || entry(s2.index, "d/sub/second").Size != 40_004 {
		t.Fatalf("opened %v; second %+v", s2.opened, entry(s2.index, "d/sub/second"))
	}
	restoreInMemory(t, s2.index, map[string][]byte{"s1": s1.pack, "s2": s2.pack})
}

func TestASparseFileKeepsItsDataRegions(t *testing.T) {
	root := tree(t)
	m, err := backup(t, root, "s1", nil)
	must(t, err)
	e := entry(m.index, "sparse.img")
	if len(e.Data) == 0 || e.Data[0][0] > 1<<20 || e.Data[0][0]+e.Data[0][1] < 1<<20+20_000 || e.Holes == 0 {
		t.Fatalf("sparse.img: data %v, holes %d", e.Data, e.Holes)
	}
	if h := entry(m.index, "hole-only"); len(h.Data) != 0 || len(h.Chunks) != 0 || h.Holes != 2<<20 {
		t.Fatalf("hole-only: %+v", h)
	}
	files := restoreInMemory(t, m.index, map[string][]byte{"s1": m.pack})
	if !bytes.Equal(files["sparse.img"][1<<20:1<<20+20_000], random(3, 20_000)) {
		t.Fatal("sparse.img's data does not read back")
	}
	// Unchanged, it keeps its regions without being read.
	again, err := backup(t, root, "s2", baseOf(m))
	must(t, err)
	if len(again.opened) != 0 || !slices.Equal(entry(again.index, "sparse.img").Data, e.Data) {
		t.Fatalf("opened %v", again.opened)
	}
}

func TestNoNewChunkWritesNoPack(t *testing.T) {
	root := tree(t)
	s1, err := backup(t, root, "s1", nil)
	must(t, err)
	// A file renamed: read again (a path the base lacks), its chunks all known.
	must(t, os.Rename(filepath.Join(root, "d/mid.js"), filepath.Join(root, "d/moved.js")))
	s2, err := backup(t, root, "s2", baseOf(s1))
	must(t, err)
	if s2.sink.writes != 0 || s2.res.Pack != nil || s2.res.NewChunks != 0 || !slices.Equal(s2.opened, []string{"d/moved.js"}) {
		t.Fatalf("%d writes, result %+v, opened %v", s2.sink.writes, s2.res, s2.opened)
	}
	if len(s2.index.Packs) != 1 || s2.index.Packs[0].Name != "s1" {
		t.Fatalf("packs %+v", s2.index.Packs)
	}
	restoreInMemory(t, s2.index, map[string][]byte{"s1": s1.pack})
}

func TestABaseThatIsNotItsRecordsBytesIsUnusableBeforeAnyByte(t *testing.T) {
	root := tree(t)
	s1, err := backup(t, root, "s1", nil)
	must(t, err)
	wrong := *baseOf(s1)
	wrong.Sha256 = sum([]byte("another index"))
	m, err := backup(t, root, "s2", &wrong)
	if codeOf(err) != pack.BaseUnusable || m.sink.writes != 0 {
		t.Fatalf("err %v, %d writes", err, m.sink.writes)
	}
	// Not kept here, but stored: fetched, checked, used.
	var gets int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets++
		w.Write(s1.indexRaw)
	}))
	defer srv.Close()
	stored := &BaseSource{File: filepath.Join(t.TempDir(), "gone.zst"), URL: srv.URL + "/index?X-Amz-Signature=x", Sha256: s1.res.Index.Sha256}
	m, err = backup(t, root, "s2", stored)
	must(t, err)
	if gets != 1 || len(m.opened) != 0 {
		t.Fatalf("%d GETs, opened %v", gets, m.opened)
	}
	// Stored, but not those bytes.
	stored.Sha256 = wrong.Sha256
	if _, err := backup(t, root, "s2", stored); codeOf(err) != pack.BaseUnusable {
		t.Fatalf("err %v", err)
	}
	// The right bytes, but not an index.
	junk := filepath.Join(t.TempDir(), "junk")
	must(t, os.WriteFile(junk, []byte("not zstd"), 0o644))
	if _, err := backup(t, root, "s2", &BaseSource{File: junk, Sha256: sum([]byte("not zstd"))}); codeOf(err) != pack.BaseUnusable {
		t.Fatalf("err %v", err)
	}
}

func TestAFileChangedWhileReadFailsThePassNamingIt(t *testing.T) {
	root := tree(t)
	hookMu.Lock()
	// Rewritten in place with as many bytes: only the check after the read can tell.
	testOpened = func(rel string) {
		if rel == "d/mid.js" {
			os.WriteFile(filepath.Join(root, rel), bytes.Repeat([]byte("const z = require('q');\n"), 3000), 0o644)
		}
	}
	hookMu.Unlock()
	dir := t.TempDir()
	_, err := Backup(Options{Root: root, Manifest: filepath.Join(dir, "m.json"), Index: filepath.Join(dir, "i.zst"), Name: "s1", AvgChunk: avg}, &memSink{})
	testOpened = func(string) {}
	if codeOf(err) != "tool_failed" || !bytes.Contains([]byte(err.Error()), []byte("d/mid.js")) {
		t.Fatalf("err %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

func TestWalkOrderIsTheWalks(t *testing.T) {
	// As the walk lists them: a directory's entries right after it, names by UTF-16 code units (an emoji's surrogates
	// before U+FF01, unlike UTF-8's byte order).
	listed := []string{"a", "a/b", "a/b/c", "a/😀", "a/！", "a-c", "a.d", "b"}
	for i := range listed {
		for j := range listed {
			if got := walkOrder(listed[i], listed[j]); (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Fatalf("walkOrder(%q, %q) = %d", listed[i], listed[j], got)
			}
		}
	}
}

// refusingSink takes the pack's bytes, then fails to store its last part.
type refusingSink struct{ memSink }

func (s *refusingSink) Close() error { return errors.New("the store refused the last part") }

func TestAPackTheStoreDidNotTakeLeavesNeitherManifestNorIndex(t *testing.T) {
	root := tree(t)
	dir := t.TempDir()
	_, err := Backup(Options{Root: root, Manifest: filepath.Join(dir, "m.json"), Index: filepath.Join(dir, "i.zst"), Name: "s1", AvgChunk: avg}, &refusingSink{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("refused the last part")) {
		t.Fatalf("err %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

func TestAPassWithoutAManifestPathWritesNoneAndAnswersItsHash(t *testing.T) {
	root := tree(t)
	with, err := backup(t, root, "s1", nil)
	must(t, err)
	dir := t.TempDir()
	res, err := Backup(Options{Root: root, Index: filepath.Join(dir, "index.zst"), Name: "s1", AvgChunk: avg, Selection: selection}, &memSink{})
	must(t, err)
	if res.JSONSha256 != sum(with.manifest) || res.JSONBytes != int64(len(with.manifest)) {
		t.Fatalf("answered %d bytes of sha256 %s; the manifest is %d bytes of %s", res.JSONBytes, res.JSONSha256, len(with.manifest), sum(with.manifest))
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("the pass left %v (only its index)", left)
	}
}

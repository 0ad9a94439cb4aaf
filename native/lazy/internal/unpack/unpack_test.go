package unpack

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/pack"
)

// item is one crafted archive entry and, unless unlisted, its manifest entry (which a test may falsify).
type item struct {
	hdr      tar.Header
	data     string
	unlisted bool
	want     map[string]any
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

var mtime = time.Unix(1700000000, 0)

func file(name, data string) item {
	return item{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}, data: data}
}

// manifestEntry is what the backup's manifest says of an item (the archive's own header, content hashed).
func manifestEntry(it item) map[string]any {
	h := it.hdr
	e := map[string]any{"path": filepath.Clean(h.Name), "mode": h.Mode & 0o7777, "mtime": h.ModTime.Unix(), "size": 0}
	switch h.Typeflag {
	case tar.TypeReg:
		e["type"], e["size"], e["sha256"] = "file", len(it.data), sum(it.data)
	case tar.TypeDir:
		e["type"] = "dir"
	case tar.TypeSymlink:
		e["type"], e["target"], e["size"] = "symlink", h.Linkname, len(h.Linkname)
	case tar.TypeLink:
		e["type"], e["link"] = "file", filepath.Clean(h.Linkname)
	}
	for k, v := range it.want {
		e[k] = v
	}
	return e
}

// craft writes the items' tar.zst and their manifest file; answers the archive and the manifest's path.
func craft(t *testing.T, items []item) ([]byte, string) {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	entries := []map[string]any{}
	for _, it := range items {
		h := it.hdr
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(it.data)); err != nil {
			t.Fatal(err)
		}
		if !it.unlisted {
			entries = append(entries, manifestEntry(it))
		}
	}
	tw.Close()
	var z bytes.Buffer
	zw, _ := zstd.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()
	m, _ := json.Marshal(map[string]any{"version": 1, "entries": entries, "totals": map[string]int{"files": 0, "dirs": 0, "symlinks": 0, "bytes": 0}})
	path := filepath.Join(t.TempDir(), "manifest.json")
	os.WriteFile(path, m, 0o644)
	return z.Bytes(), path
}

// world is a parent holding a sentinel beside the staging root the archive is unpacked into.
type world struct{ parent, root string }

func newWorld(t *testing.T) world {
	parent := t.TempDir()
	os.MkdirAll(filepath.Join(parent, "outside"), 0o755)
	os.WriteFile(filepath.Join(parent, "outside", "sentinel"), []byte("sentinel"), 0o644)
	root := filepath.Join(parent, "staging")
	os.Mkdir(root, 0o700)
	return world{parent, root}
}

// untouched: the sentinel as it was, alone, and nothing new beside the staging root.
func (w world) untouched(t *testing.T) {
	t.Helper()
	names, _ := os.ReadDir(filepath.Join(w.parent, "outside"))
	data, _ := os.ReadFile(filepath.Join(w.parent, "outside", "sentinel"))
	var st unix.Stat_t
	unix.Stat(filepath.Join(w.parent, "outside", "sentinel"), &st)
	if len(names) != 1 || string(data) != "sentinel" || st.Nlink != 1 || st.Mode&0o7777 != 0o644 {
		t.Fatalf("outside changed: %d names, %q, nlink %d, mode %o", len(names), data, st.Nlink, st.Mode&0o7777)
	}
	top, _ := os.ReadDir(w.parent)
	if len(top) != 2 {
		t.Fatalf("the staging root's parent holds %d names, want 2", len(top))
	}
}

func run(t *testing.T, w world, archive []byte, manifest string, o Options) (*Result, error) {
	t.Helper()
	o.Root = w.root
	return Run(context.Background(), bytes.NewReader(archive), func() (*Expected, error) {
		return LoadManifest(ManifestSource{File: manifest}, "expected", 1<<30, nil)
	}, o)
}

func refused(t *testing.T, err error, code string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("want a %s refusal, got %v", code, err)
	}
}

func TestDotDotAndAbsoluteNamesAreRefused(t *testing.T) {
	for _, name := range []string{"../outside/evil", "a/../../outside/evil", "/outside/evil"} {
		w := newWorld(t)
		archive, m := craft(t, []item{file("ok.txt", "ok"), file(name, "evil")})
		_, err := run(t, w, archive, m, Options{Complete: true})
		refused(t, err, "path_outside_root")
		w.untouched(t)
	}
}

func TestSymlinkThenFileThroughItIsRefused(t *testing.T) {
	// The manifest lists both (a forged one): the check is not what stops it, the descriptors are.
	w := newWorld(t)
	link := item{hdr: tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "../outside", Mode: 0o777, ModTime: mtime}}
	archive, m := craft(t, []item{link, file("s/evil", "through the link")})
	_, err := run(t, w, archive, m, Options{Complete: true})
	refused(t, err, "path_outside_root")
	w.untouched(t)
}

func TestHardLinkOutIsRefused(t *testing.T) {
	for _, target := range []string{"../outside/sentinel", "/outside/sentinel"} {
		w := newWorld(t)
		h := item{hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: target, ModTime: mtime}}
		archive, m := craft(t, []item{h, file("h", "overwritten through a hard link")})
		_, err := run(t, w, archive, m, Options{Complete: true})
		refused(t, err, "path_outside_root")
		w.untouched(t)
	}
	// A link to a name the archive has not made as a file: refused too, nothing linked.
	w := newWorld(t)
	archive, m := craft(t, []item{{hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "later", ModTime: mtime}}, file("later", "x")})
	_, err := run(t, w, archive, m, Options{Complete: true})
	refused(t, err, "tool_failed")
}

func TestHashMismatchExtraAndMissingAreDifferences(t *testing.T) {
	w := newWorld(t)
	lied := file("lied.txt", "what the archive holds")
	lied.want = map[string]any{"sha256": sum("what the backup read")}
	extra := file("extra.txt", "not in the manifest")
	extra.unlisted = true
	archive, m := craft(t, []item{file("ok.txt", "ok"), lied, extra})
	// A manifest entry the archive lacks.
	var doc map[string]any
	data, _ := os.ReadFile(m)
	json.Unmarshal(data, &doc)
	doc["entries"] = append(doc["entries"].([]any), map[string]any{"path": "gone.txt", "type": "file", "mode": 0o644, "size": 1, "mtime": 1})
	data, _ = json.Marshal(doc)
	os.WriteFile(m, data, 0o644)

	r, err := run(t, w, archive, m, Options{Complete: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal || r.Counts != (Counts{Missing: 1, Extra: 1, Changed: 1}) {
		t.Fatalf("want one of each difference, got %+v", r.Counts)
	}
	if d := r.Differences[0]; d.Path != "lied.txt" || d.Fields[0].Name != "sha256" {
		t.Fatalf("first difference: %+v", d)
	}
	if _, err := os.Lstat(filepath.Join(w.root, "extra.txt")); !os.IsNotExist(err) {
		t.Fatalf("an entry the manifest does not list was made: %v", err)
	}
	// Not complete (a layer): what it lacks is not missing.
	w2 := newWorld(t)
	r, _ = run(t, w2, archive, m, Options{})
	if r.Counts.Missing != 0 {
		t.Fatalf("a partial archive's absent entries counted missing: %+v", r.Counts)
	}
}

func TestDamagedArchiveIsNamedAsZstds(t *testing.T) {
	archive, m := craft(t, []item{file("a", string(bytes.Repeat([]byte("abcdefgh"), 50_000)))})
	for i := len(archive) / 3; i < len(archive)/3+64; i++ {
		archive[i] ^= 0xa5
	}
	_, err := run(t, newWorld(t), archive, m, Options{Complete: true})
	if err == nil || !strings.HasPrefix(err.Error(), "zstd: ") {
		t.Fatalf("want zstd's failure, got %v", err)
	}
}

func TestSetidClearedUnlessOwnersKept(t *testing.T) {
	suid := file("suid", "#!/bin/sh\n")
	suid.hdr.Mode = 0o6755
	dev := item{hdr: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666, ModTime: mtime}, want: map[string]any{"type": "other"}}
	for _, keep := range []bool{false, true} {
		w := newWorld(t)
		archive, m := craft(t, []item{suid, dev})
		r, err := run(t, w, archive, m, Options{Complete: true, KeepOwners: keep})
		if err != nil || !r.Equal {
			t.Fatalf("keep %v: %v %+v", keep, err, r)
		}
		st, _ := os.Stat(filepath.Join(w.root, "suid"))
		want := os.FileMode(0o755)
		if keep {
			want |= os.ModeSetuid | os.ModeSetgid
		}
		if st.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid) != want {
			t.Fatalf("keep %v: mode %v, want %v", keep, st.Mode(), want)
		}
		if _, err := os.Lstat(filepath.Join(w.root, "null")); !os.IsNotExist(err) {
			t.Fatalf("a device node was made")
		}
	}
}

// The round trip with the backup engine: pack's archive and manifest of a tree holding what the fidelity table
// keeps (hard link, symlink, sparse file, FIFO, empty dir, nanosecond mtime) come back equal, holes as holes.
func TestRoundTripWithPack(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "d/sub"), 0o750))
	must(os.Mkdir(filepath.Join(src, "empty-dir"), 0o700))
	must(os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello"), 0o644))
	must(os.WriteFile(filepath.Join(src, "d/sub/x.bin"), bytes.Repeat([]byte{1, 2, 3}, 400_000), 0o755))
	must(os.Symlink("../a.txt", filepath.Join(src, "d/link")))
	must(os.Link(filepath.Join(src, "a.txt"), filepath.Join(src, "d/hard")))
	must(syscall.Mkfifo(filepath.Join(src, "fifo"), 0o640))
	f, err := os.Create(filepath.Join(src, "sparse.img"))
	must(err)
	_, err = f.WriteAt(bytes.Repeat([]byte("data"), 5000), 1<<20)
	must(err)
	must(f.Truncate(8 << 20))
	f.Close()
	ns := time.Unix(1700000000, 123456789)
	must(os.Chtimes(filepath.Join(src, "d/sub/x.bin"), ns, ns))
	must(os.Chtimes(filepath.Join(src, "d/sub"), ns, ns))

	manifest := filepath.Join(t.TempDir(), "m.json")
	var archive bytes.Buffer
	if _, err := pack.Run(pack.Options{Root: src, Manifest: manifest}, &archive); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	r, err := run(t, w, archive.Bytes(), manifest, Options{Complete: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal || r.Entries < 9 {
		t.Fatalf("not equal: %+v", r)
	}
	sh := sha256.Sum256(archive.Bytes())
	if r.Sha256 != hex.EncodeToString(sh[:]) || r.Bytes != int64(archive.Len()) {
		t.Fatalf("archive hash %s over %d bytes", r.Sha256, r.Bytes)
	}
	// Every property as in the source: the backup engine's manifest of the result equals the source's.
	again := filepath.Join(t.TempDir(), "again.json")
	if _, err := pack.Run(pack.Options{Root: w.root, Manifest: again}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if a, b := contentOf(t, manifest), contentOf(t, again); a != b {
		t.Fatalf("manifests differ:\n%s\n%s", a, b)
	}
	var st unix.Stat_t
	must(unix.Stat(filepath.Join(w.root, "sparse.img"), &st))
	if st.Size != 8<<20 || st.Blocks*512 > 1<<20 {
		t.Fatalf("sparse file came back dense: size %d, %d bytes allocated", st.Size, st.Blocks*512)
	}
	must(unix.Stat(filepath.Join(w.root, "d/sub/x.bin"), &st))
	if st.Mtim.Nsec != 123456789 {
		t.Fatalf("mtime nanoseconds %d", st.Mtim.Nsec)
	}
	// The metadata walk agrees, then names a mode changed after the unpack.
	x, _ := LoadManifest(ManifestSource{File: manifest}, "expected", 1<<30, nil)
	if walked, err := Walk(w.root, x, false, 20); err != nil || !walked.Equal || walked.Entries != r.Entries || walked.Sparse != "compared" {
		t.Fatalf("walk: %v %+v (entries %d)", err, walked, r.Entries)
	}
	must(os.Chmod(filepath.Join(w.root, "d/sub/x.bin"), 0o700))
	if walked, _ := Walk(w.root, x, false, 20); walked.Equal || walked.Differences[0].Path != "d/sub/x.bin" || walked.Differences[0].Fields[0].Name != "mode" {
		t.Fatalf("walk after chmod: %+v", walked)
	}
	var a, b unix.Stat_t
	unix.Stat(filepath.Join(w.root, "a.txt"), &a)
	unix.Stat(filepath.Join(w.root, "d/hard"), &b)
	if a.Ino != b.Ino {
		t.Fatal("the hard link came back as a copy")
	}
}

// contentOf is a manifest without its stat keys (the source's inodes and ctimes), as a restore compares it.
func contentOf(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Entries []map[string]any `json:"entries"`
	}
	json.Unmarshal(data, &m)
	for _, e := range m.Entries {
		delete(e, "stat")
	}
	out, _ := json.Marshal(m.Entries)
	return string(out)
}

// An overlay delta's layer unpacked without a manifest: every entry made as the archive has it — a whiteout kept, a
// device never made — and still nothing beneath a symlink or outside the root.
func TestUncheckedMakesTheArchiveAsItIs(t *testing.T) {
	w := newWorld(t)
	dir := item{hdr: tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o750, ModTime: mtime}}
	whiteout := item{hdr: tar.Header{Name: "d/gone", Typeflag: tar.TypeChar, Mode: 0o644, ModTime: mtime}}
	device := item{hdr: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666, ModTime: mtime}}
	link := item{hdr: tar.Header{Name: "d/link", Typeflag: tar.TypeSymlink, Linkname: "../a.txt", Mode: 0o777, ModTime: mtime}}
	archive, _ := craft(t, []item{file("a.txt", "new in the layer"), dir, whiteout, device, link})
	r, err := Run(context.Background(), bytes.NewReader(archive), func() (*Expected, error) { return NewExpected(nil), nil }, Options{Root: w.root, Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal || r.Entries != 5 {
		t.Fatalf("result %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(w.root, "a.txt")); string(b) != "new in the layer" {
		t.Fatalf("a.txt reads %q", b)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(w.root, "d/gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Fatalf("the whiteout: %v, mode %o, rdev %d", err, st.Mode, st.Rdev)
	}
	if _, err := os.Lstat(filepath.Join(w.root, "null")); !os.IsNotExist(err) {
		t.Fatalf("a device was made: %v", err)
	}
	if target, _ := os.Readlink(filepath.Join(w.root, "d/link")); target != "../a.txt" {
		t.Fatalf("the symlink points at %q", target)
	}

	w = newWorld(t)
	archive, _ = craft(t, []item{{hdr: tar.Header{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "../outside", Mode: 0o777, ModTime: mtime}}, file("s/evil", "through the link")})
	_, err = Run(context.Background(), bytes.NewReader(archive), func() (*Expected, error) { return NewExpected(nil), nil }, Options{Root: w.root, Unchecked: true})
	refused(t, err, "path_outside_root")
	w.untouched(t)
}

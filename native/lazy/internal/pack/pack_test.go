package pack

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// tree writes a tree of the cases the fidelity table covers: files, an empty file, directories (one empty), a
// symlink, hard links, a sparse file, a FIFO, a socket (left out), a nanosecond mtime.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "d/sub"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "empty-dir"), 0o700))
	must(os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello"), 0o644))
	must(os.WriteFile(filepath.Join(root, "d/sub/x.bin"), bytes.Repeat([]byte{1, 2, 3}, 400_000), 0o755))
	must(os.WriteFile(filepath.Join(root, "empty"), nil, 0o600))
	must(os.Symlink("../a.txt", filepath.Join(root, "d/link")))
	must(os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "d/hard")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(root, "sock"))
	must(err)
	t.Cleanup(func() { l.Close() })
	f, err := os.Create(filepath.Join(root, "sparse.img"))
	must(err)
	_, err = f.WriteAt(bytes.Repeat([]byte("data"), 5000), 1<<20)
	must(err)
	must(f.Truncate(4 << 20))
	must(f.Close())
	ts := time.Unix(1_700_000_000, 123_456_789)
	must(os.Chtimes(filepath.Join(root, "a.txt"), ts, ts))
	return root
}

type packed struct {
	archive  []byte
	manifest struct {
		Entries []Entry `json:"entries"`
		Totals  Totals  `json:"totals"`
	}
	result Result
}

func packTree(t *testing.T, root string, sel *Selection) (packed, error) {
	t.Helper()
	var p packed
	var out bytes.Buffer
	mpath := filepath.Join(t.TempDir(), "m.json")
	r, err := Run(Options{Root: root, Manifest: mpath, Selection: sel}, &out)
	if err != nil {
		if left, _ := os.ReadDir(filepath.Dir(mpath)); len(left) != 0 {
			t.Errorf("a failed pack left %v behind", left)
		}
		return p, err
	}
	p.archive, p.result = out.Bytes(), r
	raw, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &p.manifest); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != r.JSONSha256 || int64(len(raw)) != r.JSONBytes {
		t.Errorf("the result says the manifest is %d bytes sha256 %s; the file is %d bytes sha256 %x", r.JSONBytes, r.JSONSha256, len(raw), sum)
	}
	return p, nil
}

// read decodes the archive with archive/tar (which reads GNU 1.0 sparse entries back with their holes as zeros).
func read(t *testing.T, archive []byte) (names []string, content map[string]string, headers map[string]*tar.Header) {
	t.Helper()
	zr, err := zstd.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	content, headers = map[string]string{}, map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		names = append(names, name)
		headers[name] = h
		if h.Typeflag == tar.TypeReg {
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil {
				t.Fatal(err)
			}
			content[name] = hex.EncodeToString(sum.Sum(nil))
		}
	}
}

func TestPackArchiveAndManifestAgree(t *testing.T) {
	root := tree(t)
	p, err := packTree(t, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.txt", "d", "d/hard", "d/link", "d/sub", "d/sub/x.bin", "empty", "empty-dir", "fifo", "sparse.img"}
	var paths []string
	byPath := map[string]Entry{}
	for _, e := range p.manifest.Entries {
		paths = append(paths, e.Path)
		byPath[e.Path] = e
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("manifest lists %v, want %v (sorted walk, socket left out)", paths, want)
	}
	names, content, headers := read(t, p.archive)
	if !slices.Equal(names, want) {
		t.Fatalf("archive lists %v, want %v", names, want)
	}
	for _, e := range p.manifest.Entries {
		if e.Type == "file" && e.Link == "" {
			b, err := os.ReadFile(filepath.Join(root, e.Path))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if e.Sha256 != hex.EncodeToString(sum[:]) || content[e.Path] != e.Sha256 {
				t.Errorf("%s: manifest %s, archive %s, file %x", e.Path, e.Sha256, content[e.Path], sum)
			}
		}
		if e.Stat.Ino == "" || e.Stat.CtimeNs == "" {
			t.Errorf("%s has no lstat key", e.Path)
		}
	}
	if e := byPath["d/hard"]; e.Link != "a.txt" || e.Sha256 != "" || e.Size != 5 || headers["d/hard"].Typeflag != tar.TypeLink {
		t.Errorf("hard link: %+v", e)
	}
	if e := byPath["d/link"]; e.Type != "symlink" || e.Target != "../a.txt" || e.Size != 8 {
		t.Errorf("symlink: %+v", e)
	}
	if e := byPath["sparse.img"]; e.Size != 4<<20 || e.Holes < 4<<20-64<<10 || headers["sparse.img"].Size != 4<<20 {
		t.Errorf("sparse: %+v (read back as %d bytes)", e, headers["sparse.img"].Size)
	}
	if e := byPath["fifo"]; e.Type != "other" || headers["fifo"].Typeflag != tar.TypeFifo {
		t.Errorf("fifo: %+v", e)
	}
	if e := byPath["a.txt"]; e.Mtime != 1_700_000_000 || !headers["a.txt"].ModTime.Equal(time.Unix(1_700_000_000, 123_456_789)) {
		t.Errorf("mtime: %+v, header %v", e, headers["a.txt"].ModTime)
	}
	if p.result.Totals != (Totals{Files: 5, Dirs: 3, Symlinks: 1, Bytes: 5 + 1_200_000 + 4<<20}) || p.result.Entries != len(want) {
		t.Errorf("result %+v", p.result)
	}
}

// The archive's frames carry a content checksum: damage is zstd's error, retried as a damaged transfer (pack.go).
func TestPackFramesHaveAChecksum(t *testing.T) {
	p, err := packTree(t, tree(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(p.archive); err != nil {
		t.Fatal(err)
	}
	if !h.HasCheckSum {
		t.Fatal("the first frame carries no content checksum")
	}
}

// GNU tar, which restores extract, reads the archive into the same tree (holes as holes).
func TestPackGNUTarExtracts(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar")
	}
	root := tree(t)
	p, err := packTree(t, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("tar", "--numeric-owner", "-p", "-C", out, "-xf", "-")
	zr, _ := zstd.NewReader(bytes.NewReader(p.archive))
	defer zr.Close()
	cmd.Stdin = zr
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v %s", err, b)
	}
	for _, name := range []string{"a.txt", "d/sub/x.bin", "sparse.img", "d/hard"} {
		a, _ := os.ReadFile(filepath.Join(root, name))
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs after extraction (%v)", name, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(out, "sparse.img"), &st); err != nil || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse.img came back with %d bytes allocated", st.Blocks*512)
	}
	var a, h syscall.Stat_t
	syscall.Stat(filepath.Join(out, "a.txt"), &a)
	syscall.Stat(filepath.Join(out, "d/hard"), &h)
	if a.Ino != h.Ino {
		t.Errorf("hard link came back as two files")
	}
	if target, _ := os.Readlink(filepath.Join(out, "d/link")); target != "../a.txt" {
		t.Errorf("symlink came back as %q", target)
	}
}

func TestPackFailsWhenAFileChangesWhileRead(t *testing.T) {
	root := tree(t)
	defer func() { testHook = func(string, string) {} }()
	testHook = func(stage, rel string) {
		if stage == "read" && rel == "d/sub/x.bin" {
			os.WriteFile(filepath.Join(root, rel), []byte("rewritten"), 0o755)
		}
	}
	_, err := packTree(t, root, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != "tool_failed" || !strings.Contains(e.Message, "d/sub/x.bin (file changed as we read it)") {
		t.Fatalf("got %v", err)
	}
}

func TestPackFailsWhenAFileIsRemovedAfterTheWalk(t *testing.T) {
	root := tree(t)
	defer func() { testHook = func(string, string) {} }()
	testHook = func(stage, rel string) {
		if stage == "open" && rel == "empty" {
			os.Remove(filepath.Join(root, rel))
		}
	}
	_, err := packTree(t, root, nil)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "empty (File removed before we read it)") {
		t.Fatalf("got %v", err)
	}
}

func TestPackRefusesNamesThatAreNotUTF8(t *testing.T) {
	root := tree(t)
	if err := os.WriteFile(filepath.Join(root, "d", "bad\xffname"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := packTree(t, root, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != "bad_request" || e.Field != "path" || !strings.Contains(e.Message, filepath.Join(root, "d")+" holds a name that is not UTF-8") {
		t.Fatalf("got %v", err)
	}
}

func TestPackSelection(t *testing.T) {
	root := tree(t)
	os.WriteFile(filepath.Join(root, "d/CACHEDIR.TAG"), []byte(cacheDirSignature+"\n"), 0o644)
	sel := &Selection{
		Patterns:      []Pattern{{Pattern: "*.txt", Re: `^(?:.*/)?[^/]*\.txt$`}},
		Ignored:       []string{"empty-dir"},
		ExcludeCaches: true,
		Record:        &Record{Excludes: []string{"*.txt"}, ExcludeCaches: true},
	}
	p, err := packTree(t, root, sel)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range p.manifest.Entries {
		paths = append(paths, e.Path)
	}
	if want := []string{"empty", "fifo", "sparse.img"}; !slices.Equal(paths, want) {
		t.Errorf("selected %v, want %v", paths, want)
	}
	if want := map[string]int{"exclude *.txt": 1, "gitignore": 1, "CACHEDIR.TAG": 1}; !maps(p.result.Excluded, want) {
		t.Errorf("excluded %v, want %v", p.result.Excluded, want)
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The agent sorts names by UTF-16 code units (JavaScript's sort): U+FF01 after an emoji, unlike byte order.
func TestSortNamesAsJavaScript(t *testing.T) {
	names := []string{"！", "😀", "z", "A", "é", "a"}
	sortNames(names)
	if want := []string{"A", "a", "z", "é", "😀", "！"}; !slices.Equal(names, want) {
		t.Errorf("got %q, want %q", names, want)
	}
}

// manifestSeconds follows node-tar's double arithmetic: a time a few ns short of a second reads as that second.
func TestManifestSecondsAsNodeTarReadsThem(t *testing.T) {
	for _, c := range []struct {
		ts   time.Time
		want int64
	}{
		{time.Unix(1_700_000_000, 0), 1_700_000_000},
		{time.Unix(1_700_000_000, 500_000_000), 1_700_000_000},
		{time.Unix(1_700_000_000, 999_999_999), 1_700_000_001},
		{time.Unix(-5, 0), -5},
		{time.Unix(-5, 250_000_000), -5},
	} {
		if got := manifestSeconds(c.ts); got != c.want {
			t.Errorf("%v: %d, want %d", c.ts, got, c.want)
		}
	}
}

// A manifest written inside the tree it describes (a backup of a directory that holds the staging area) is not
// archived: the agent's pass writes its manifest after its walk, so it never archives it either.
func TestPackLeavesOutItsOwnManifest(t *testing.T) {
	root := tree(t)
	var out bytes.Buffer
	if _, err := Run(Options{Root: root, Manifest: filepath.Join(root, "d", "m.json")}, &out); err != nil {
		t.Fatal(err)
	}
	names, _, _ := read(t, out.Bytes())
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "d/m.json") }) {
		t.Errorf("the archive holds the manifest: %v", names)
	}
}

package pack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// based packs root whole (the base) and answers its manifest file and that file's SHA-256.
func based(t *testing.T, root string) (string, string) {
	t.Helper()
	m := filepath.Join(t.TempDir(), "base.json")
	r, err := Run(Options{Root: root, Manifest: m}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	return m, r.JSONSha256
}

type layerFile struct {
	Version int      `json:"version"`
	Base    string   `json:"base"`
	Entries []Entry  `json:"entries"`
	Removed []string `json:"removed"`
	Totals  Totals   `json:"totals"`
}

func runDelta(t *testing.T, root string, d Delta) (DeltaResult, []string, layerFile, error) {
	t.Helper()
	var out bytes.Buffer
	dir := t.TempDir()
	d.LayerOver, d.Keep = "base-1", filepath.Join(dir, "kept.json")
	r, err := RunDelta(Options{Root: root, Manifest: filepath.Join(dir, "layer.json")}, d, &out)
	if err != nil {
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("a failed delta left %v behind", left)
		}
		if errors.As(err, new(*Error)) && err.(*Error).Code == BaseUnusable && out.Len() != 0 {
			t.Errorf("an unusable base after %d archive bytes", out.Len())
		}
		return r, nil, layerFile{}, err
	}
	names, _, _ := read(t, out.Bytes())
	raw, err := os.ReadFile(filepath.Join(dir, "layer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l layerFile
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != r.JSONSha256 {
		t.Errorf("the result's layer sha256 is not the file's")
	}
	kept, err := os.ReadFile(d.Keep)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(kept); hex.EncodeToString(sum[:]) != r.TreeSha256 {
		t.Errorf("the result's tree sha256 is not the kept file's")
	}
	return r, names, l, nil
}

func TestDeltaArchivesWhatChangedAndLayersIt(t *testing.T) {
	root := tree(t)
	base, sum := based(t, root)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "d/sub/new.txt"), []byte("new"), 0o644))
	must(os.Remove(filepath.Join(root, "empty")))
	must(os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "d/sub/hard-2")))

	r, names, layer, err := runDelta(t, root, Delta{Base: base, Sha256: sum})
	if err != nil {
		t.Fatal(err)
	}
	// The new file and its directory; the hard-link group whose member was added, first name first, and their
	// directories; the root is never archived (the deleted file's directory).
	if want := []string{"a.txt", "d", "d/hard", "d/sub", "d/sub/hard-2", "d/sub/new.txt"}; !slices.Equal(names, want) {
		t.Errorf("archived %v, want %v", names, want)
	}
	if !slices.Equal(layer.Removed, []string{"empty"}) || layer.Version != 2 || layer.Base != "base-1" {
		t.Errorf("layer %+v", layer)
	}
	var paths []string
	for _, e := range layer.Entries {
		paths = append(paths, e.Path)
	}
	// a.txt and d/hard as the base had them but for the key (the new link moved their ctime; a.txt was hashed as a
	// suspect, d/hard is its later name); d archived as the base had it, so not in the layer.
	if want := []string{"a.txt", "d/hard", "d/sub", "d/sub/hard-2", "d/sub/new.txt"}; !slices.Equal(paths, want) {
		t.Errorf("layer lists %v, want %v", paths, want)
	}
	if r.Delta.Changed != 3 || r.Delta.ChangedBytes != 3+5 || r.Delta.Suspects != 1 || r.Archived != 6 || r.Entries != 11 || r.Totals.Files != 6 {
		t.Errorf("result %+v", r)
	}
}

func TestDeltaOfAnUnchangedTreeArchivesNothingAndReadsNothing(t *testing.T) {
	root := tree(t)
	base, sum := based(t, root)
	r, names, layer, err := runDelta(t, root, Delta{Base: base, Sha256: sum})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 || len(layer.Entries) != 0 || len(layer.Removed) != 0 || r.Delta.Suspects != 0 {
		t.Errorf("archived %v, layer %+v, result %+v", names, layer, r)
	}
}

// A kept base that is not the bytes its record names is refused before a byte of archive (the agent then makes the
// delta from the store's copy).
func TestDeltaRefusesABaseWhoseHashIsNotTheRecords(t *testing.T) {
	root := tree(t)
	base, _ := based(t, root)
	for _, d := range []Delta{{Base: base, Sha256: strings.Repeat("0", 64)}, {Base: filepath.Join(t.TempDir(), "none.json"), Sha256: strings.Repeat("0", 64)}} {
		_, _, _, err := runDelta(t, root, d)
		var e *Error
		if !errors.As(err, &e) || e.Code != BaseUnusable {
			t.Errorf("%s: got %v", d.Base, err)
		}
	}
}

func TestDeltaFailsWhenAChangedFileChangesWhileRead(t *testing.T) {
	root := tree(t)
	base, sum := based(t, root)
	os.WriteFile(filepath.Join(root, "d/sub/x.bin"), []byte("edited"), 0o755)
	defer func() { testHook = func(string, string) {} }()
	testHook = func(stage, rel string) {
		if stage == "read" && rel == "d/sub/x.bin" {
			os.WriteFile(filepath.Join(root, rel), []byte("edited again"), 0o755)
		}
	}
	_, _, _, err := runDelta(t, root, Delta{Base: base, Sha256: sum})
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "d/sub/x.bin (file changed as we read it)") {
		t.Fatalf("got %v", err)
	}
}

// The rule itself, on lstat answers and base entries alone (delta.ts classifyByMetadata).
func TestClassifyByMetadata(t *testing.T) {
	uid := uint32(0)
	key := func(ino uint64) (unix.Stat_t, *Stat) {
		st := unix.Stat_t{Ino: ino, Dev: 1, Mode: unix.S_IFREG | 0o644, Size: 5, Nlink: 1}
		st.Mtim = unix.NsecToTimespec(time.Unix(100, 5).UnixNano())
		st.Ctim = st.Mtim
		return st, &Stat{Ino: "0", Dev: "1", MtimeNs: "100000000005", CtimeNs: "100000000005"}
	}
	file := func(path string, ino uint64) (walked, baseEntry) {
		st, s := key(ino)
		s.Ino = strconv.FormatUint(ino, 10)
		return walked{path: path, st: st}, baseEntry{Path: path, Type: "file", Mode: 0o644, Size: 5, Mtime: 100, UID: &uid, GID: &uid, Sha256: "h", Stat: s}
	}
	same, sameBase := file("same", 1)
	moved, movedBase := file("moved", 2)
	moved.st.Ctim.Nsec++ // the key moved, nothing else: a suspect
	resized, resizedBase := file("resized", 3)
	resized.st.Size = 6 // a cheap field: changed without reading
	newer, _ := file("dir/new", 4)
	dir := walked{path: "dir", st: unix.Stat_t{Ino: 9, Dev: 1, Mode: unix.S_IFDIR | 0o755}}
	dirBase := baseEntry{Path: "dir", Type: "dir", Mode: 0o755, UID: &uid, GID: &uid, Stat: &Stat{Ino: "9", Dev: "1", MtimeNs: "0", CtimeNs: "0"}}
	walk := []walked{dir, newer, moved, resized, same}
	b := &baseManifest{byPath: map[string]int{}}
	for _, e := range []baseEntry{dirBase, {Path: "dir/gone", Type: "file"}, {Path: "dir/gone-dir", Type: "dir"}, {Path: "dir/gone-dir/x", Type: "file"}, movedBase, resizedBase, sameBase} {
		b.byPath[e.Path] = len(b.entries)
		b.entries = append(b.entries, e)
	}
	c := classify(walk, b, false)
	var changed []string
	for i, ok := range c.changed {
		if ok {
			changed = append(changed, walk[i].path)
		}
	}
	// dir: its key did not move, but entries below it were deleted (its mtime must be put back on restore).
	if want := []string{"dir", "dir/new", "resized"}; !slices.Equal(changed, want) {
		t.Errorf("changed %v, want %v", changed, want)
	}
	if len(c.suspects) != 1 || walk[c.suspects[0]].path != "moved" {
		t.Errorf("suspects %v", c.suspects)
	}
	if want := []string{"dir/gone-dir/x", "dir/gone-dir", "dir/gone"}; !slices.Equal(c.deleted, want) {
		t.Errorf("deleted %v, want %v (deepest first, then names in reverse)", c.deleted, want)
	}
	if c := classify(walk, b, true); len(c.suspects) != 2 {
		t.Errorf("rehash: suspects %v, want moved and same", c.suspects)
	}
}

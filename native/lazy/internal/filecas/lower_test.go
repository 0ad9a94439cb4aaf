package filecas

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"snapflow/native/lazy/internal/pack"
)

// overlayOver lays layer (then an empty upper) over a copy of root — the copy stands in for files-mount serving
// root's index: same names and content, other inodes and ctimes — and answers the merged tree, the layer and the upper.
func overlayOver(t *testing.T, root string, change func(layer string)) (merged, layer, upper string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("an overlay mount needs root")
	}
	dir := t.TempDir()
	lower, layer, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "layer"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	must(t, exec.Command("cp", "-a", root, lower).Run())
	for _, d := range []string{layer, upper, work, merged} {
		must(t, os.Mkdir(d, 0o755))
	}
	change(layer)
	opts := "redirect_dir=off,lowerdir=" + layer + ":" + lower + ",upperdir=" + upper + ",workdir=" + work
	if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o", opts, merged).CombinedOutput(); err != nil {
		t.Skipf("no overlay here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", merged).Run() })
	return merged, layer, upper
}

func TestOverAnOverlayOnlyTheNamesItsLayersTouchAreRead(t *testing.T) {
	root := tree(t)
	first, err := backup(t, root, "s1", nil)
	must(t, err)
	mid, err := os.ReadFile(filepath.Join(root, "d/mid.js"))
	must(t, err)
	st, err := os.Stat(filepath.Join(root, "d/mid.js"))
	must(t, err)
	edited := bytes.Replace(mid, []byte("const x"), []byte("const z"), 1)
	merged, layer, upper := overlayOver(t, root, func(layer string) {
		// A delta as a wake extracts it: d/mid.js edited at its own size and mtime (only the layer can tell), a new
		// file, and a.txt deleted (a whiteout).
		must(t, os.MkdirAll(filepath.Join(layer, "d"), 0o755))
		must(t, os.WriteFile(filepath.Join(layer, "d/mid.js"), edited, 0o644))
		must(t, os.Chtimes(filepath.Join(layer, "d/mid.js"), st.ModTime(), st.ModTime()))
		must(t, os.WriteFile(filepath.Join(layer, "d/new.txt"), []byte("new in the delta"), 0o644))
		must(t, syscall.Mknod(filepath.Join(layer, "a.txt"), syscall.S_IFCHR, 0))
		dt := time.Unix(st.ModTime().Unix(), 0)
		must(t, os.Chtimes(filepath.Join(layer, "d"), dt, dt))
	})

	// Without the layers every file looks changed (another inode, another ctime): all of them are read.
	all, err := backup(t, merged, "s2", baseOf(first))
	must(t, err)
	if all.res.Reused.Files != 0 {
		t.Fatalf("without layers %d files were taken from the base", all.res.Reused.Files)
	}

	base := baseOf(first)
	base.Layers = []string{layer, upper}
	m, err := backup(t, merged, "s3", base)
	must(t, err)
	slices.Sort(m.opened)
	if !slices.Equal(m.opened, []string{"d/mid.js", "d/new.txt"}) {
		t.Fatalf("opened %v, not only the names the layer holds", m.opened)
	}
	// pack's manifest of the merged tree, but for the stat keys of what lies below a directory no layer holds (d/sub,
	// d-x): not walked, taken from the base with the base's keys.
	got, want, before := manifestByPath(t, m.manifest), manifestByPath(t, packManifest(t, merged)), manifestByPath(t, first.manifest)
	if len(got) != len(want) {
		t.Fatalf("%d entries, pack's walk of the merged tree has %d", len(got), len(want))
	}
	for path, w := range want {
		g := got[path]
		if strings.HasPrefix(path, "d/sub/") || strings.HasPrefix(path, "d-x/") {
			if g.Stat != before[path].Stat {
				t.Errorf("%s: stat key %+v, not the base's (was it walked?)", path, g.Stat)
			}
			g.Stat = w.Stat
		}
		if g != w {
			t.Errorf("%s: %+v, pack's walk of the merged tree says %+v", path, g, w)
		}
	}
	if !slices.Equal(manifestOrder(t, m.manifest), manifestOrder(t, packManifest(t, merged))) {
		t.Error("the manifest's entries are not in walk order")
	}
	if m.res.Read.Files != 2 || m.res.Reused.Files+m.res.Read.Files != all.res.Read.Files {
		t.Errorf("%d files read and %d taken from the base, of %d", m.res.Read.Files, m.res.Reused.Files, all.res.Read.Files)
	}
	files := restoreInMemory(t, m.index, map[string][]byte{"s1": first.pack, "s3": m.pack})
	if !bytes.Equal(files["d/mid.js"], edited) || string(files["d/new.txt"]) != "new in the delta" || files["a.txt"] != nil {
		t.Fatal("the changed names do not read back as the layer has them")
	}
	big, err := os.ReadFile(filepath.Join(root, "big.bin"))
	must(t, err)
	if !bytes.Equal(files["big.bin"], big) {
		t.Fatal("big.bin, from the base, does not read back")
	}
}

func TestALayerThatCannotBeListedMakesTheBaseUnusable(t *testing.T) {
	root := tree(t)
	first, err := backup(t, root, "s1", nil)
	must(t, err)
	base := baseOf(first)
	base.Layers = []string{filepath.Join(t.TempDir(), "missing")}
	if _, err := backup(t, root, "s2", base); codeOf(err) != "base_unusable" {
		t.Fatalf("err %v", err)
	}
}

func manifestByPath(t *testing.T, b []byte) map[string]pack.Entry {
	t.Helper()
	var m struct{ Entries []pack.Entry }
	must(t, json.Unmarshal(b, &m))
	out := make(map[string]pack.Entry, len(m.Entries))
	for _, e := range m.Entries {
		out[e.Path] = e
	}
	return out
}

func manifestOrder(t *testing.T, b []byte) []string {
	t.Helper()
	var m struct{ Entries []pack.Entry }
	must(t, json.Unmarshal(b, &m))
	out := make([]string, len(m.Entries))
	for i, e := range m.Entries {
		out[i] = e.Path
	}
	return out
}

// A sleep of a woken tree: over an overlay, a layer holds only the names its layers touched (the grafted and the
// unchanged ones are the base's), names what they removed, and composes with the base into the whole index a
// compaction of the same tree writes.
func TestALayerOverAnOverlayHoldsOnlyWhatItsLayersTouched(t *testing.T) {
	root := tree(t)
	first, err := backup(t, root, "s1", nil)
	must(t, err)
	dst, err := os.Stat(filepath.Join(root, "d"))
	must(t, err)
	merged, layer, upper := overlayOver(t, root, func(layer string) {
		must(t, os.MkdirAll(filepath.Join(layer, "d"), 0o755))
		must(t, os.WriteFile(filepath.Join(layer, "d/new.txt"), []byte("new in the delta"), 0o644))
		must(t, syscall.Mknod(filepath.Join(layer, "a.txt"), syscall.S_IFCHR, 0))
		// d as the base has it (a delta's directory keeps its mtime when the tar sets it): else d is in the layer
		// whenever the test crosses a second
		must(t, os.Chtimes(filepath.Join(layer, "d"), dst.ModTime(), dst.ModTime()))
	})
	// and a change made through the merged tree after the wake, as a sleep finds it in the upper
	must(t, os.WriteFile(filepath.Join(merged, "later.txt"), []byte("written after the wake"), 0o600))
	base := baseOf(first)
	base.Layers = []string{layer, upper}
	l := layerPass(t, merged, "s2", base, readFile(t, base.File))
	if l.res.Depth != 1 {
		t.Fatalf("depth %d, not a layer", l.res.Depth)
	}
	got := paths(l.object.Entries)
	if want := []string{"d/new.txt", "later.txt"}; !slices.Equal(got, want) {
		t.Fatalf("the layer holds %v, not %v", got, want)
	}
	if !slices.Equal(l.object.Layer.Removed, []string{"a.txt"}) {
		t.Fatalf("removed %v", l.object.Layer.Removed)
	}
	whole, err := backup(t, merged, "s3", base)
	must(t, err)
	if a, b := manifestByPath(t, manifestOf(t, l.composed, nil)), manifestByPath(t, whole.manifest); len(a) != len(b) {
		t.Fatalf("composed %d entries, the whole index %d", len(a), len(b))
	} else {
		for path, w := range b {
			g := a[path]
			g.Stat, w.Stat = pack.Stat{}, pack.Stat{}
			if g != w {
				t.Errorf("%s: composed %+v, whole %+v", path, g, w)
			}
		}
	}
	files := restoreInMemory(t, l.composed, map[string][]byte{"s1": first.pack, "s2": l.pack})
	if string(files["later.txt"]) != "written after the wake" || string(files["d/new.txt"]) != "new in the delta" || files["a.txt"] != nil {
		t.Fatal("the layer's names do not read back")
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

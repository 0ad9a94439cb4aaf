package filecas

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	json "github.com/goccy/go-json"

	"snapflow/native/lazy/internal/pack"
)

// layered is a pass that writes a layer over base (whose chain, whole index first, is chain): what it wrote, and the
// index composed from chain + the layer.
type layered struct {
	res      Result
	raw      []byte
	object   *Index // the layer as stored
	composed *Index
	manifest []byte
	pack     []byte
	dir      string
	stats    string
}

func layerPass(t *testing.T, root, name string, base *BaseSource, chain ...[]byte) layered {
	t.Helper()
	l := layered{dir: t.TempDir()}
	l.stats = filepath.Join(l.dir, "stats.zst")
	sink := &memSink{}
	opts := Options{Root: root, Manifest: filepath.Join(l.dir, "m.json"), Index: filepath.Join(l.dir, "index.zst"), Name: name, AvgChunk: avg, Selection: selection, Base: base, Layer: true, Stats: l.stats}
	var err error
	l.res, err = Backup(opts, sink)
	must(t, err)
	l.pack = sink.Bytes()
	l.raw, err = os.ReadFile(opts.Index)
	must(t, err)
	l.manifest, err = os.ReadFile(opts.Manifest)
	must(t, err)
	if sum(l.raw) != l.res.Index.Sha256 {
		t.Fatal("the result's SHA-256 is not the index written")
	}
	l.object, err = decodeObject(bytes.NewReader(l.raw), DefaultLimits)
	must(t, err)
	l.composed, _, err = DecodeChain(append(slices.Clone(chain), l.raw), DefaultLimits)
	must(t, err)
	return l
}

// layerBase names l's index (a layer over chain) as the next pass's base.
func layerBase(t *testing.T, l layered, chain ...[]byte) *BaseSource {
	b := &BaseSource{File: filepath.Join(l.dir, "index.zst"), Sha256: l.res.Index.Sha256}
	for i, body := range chain {
		p := filepath.Join(l.dir, "chain-"+string(rune('a'+i)))
		must(t, os.WriteFile(p, body, 0o644))
		b.Chain = append(b.Chain, ChainObject{File: p, Sha256: sum(body)})
	}
	return b
}

// manifestOf is the manifest made from x with the pass's selection record (what files-manifest writes).
func manifestOf(t *testing.T, x *Index, record *pack.Record) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.json")
	_, err := x.WriteManifest(p, record)
	must(t, err)
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

func paths(es []Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

func TestALayerHoldsOnlyWhatChangedAndComposesToTheWholeIndex(t *testing.T) {
	root := tree(t)
	a, err := backup(t, root, "s1", nil)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "d/new.bin"), random(9, 50_000), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello again"), 0o644))
	must(t, os.Remove(filepath.Join(root, "d-x/！full")))
	must(t, os.Remove(filepath.Join(root, "d-x")))

	l := layerPass(t, root, "s2", baseOf(a), a.indexRaw)
	if l.object.Layer == nil || l.object.Layer.Parent != a.res.Index.Sha256 || l.object.Layer.Depth != 1 || l.res.Depth != 1 {
		t.Fatalf("not a layer over s1 at depth 1: %+v", l.object.Layer)
	}
	// Only what changed: the two files, and the directories whose mtime moved (the root, d) if it moved by a whole
	// unit of the manifest's mtime (else only their lstat keys changed: they keep their parent's).
	got := paths(l.object.Entries)
	if !slices.Contains(got, "a.txt") || !slices.Contains(got, "d/new.bin") || slices.ContainsFunc(got, func(p string) bool { return !slices.Contains([]string{"", "a.txt", "d", "d/new.bin"}, p) }) {
		t.Fatalf("the layer holds %q", got)
	}
	if got, want := l.object.Layer.Removed, []string{"d-x", "d-x/！full"}; !slices.Equal(got, want) {
		t.Fatalf("the layer removes %q, not %q", got, want)
	}
	if len(l.object.Packs) != 1 || l.object.Packs[0].Name != "s2" || len(l.res.Packs) != 2 {
		t.Fatalf("the layer's packs %+v, the snapshot's %+v", l.object.Packs, l.res.Packs)
	}
	// The composed index is the tree: the manifest made from it is the pass's, byte for byte, and pack's own but for
	// the lstat keys of entries whose only change was their key (a directory's mtime moved within its second).
	if got := manifestOf(t, l.composed, l.res.Selection); !bytes.Equal(got, l.manifest) || withoutKeys(t, got) != withoutKeys(t, packManifest(t, root)) {
		t.Fatalf("the composed index's manifest is not the pass's:\n%s\n%s", got, l.manifest)
	}
	files := restoreInMemory(t, l.composed, map[string][]byte{"s1": a.pack, "s2": l.pack})
	if string(files["a.txt"]) != "hello again" || !bytes.Equal(files["d/new.bin"], random(9, 50_000)) || !bytes.Equal(files["big.bin"], random(1, 300_000)) {
		t.Fatal("the composed index does not read back as the tree")
	}
	if int64(len(l.raw)) >= a.res.Index.Bytes/2 {
		t.Fatalf("the layer is %d bytes; the whole index %d", len(l.raw), a.res.Index.Bytes)
	}
	// A layer alone means nothing: Decode refuses it.
	if _, err := Decode(bytes.NewReader(l.raw), DefaultLimits); codeOf(err) != "bad_request" {
		t.Fatalf("Decode of a layer: %v", err)
	}

	// A layer over the layer: the next pass reads its base's chain and composes it.
	must(t, os.WriteFile(filepath.Join(root, "d/sub/copy.txt"), []byte("changed twice"), 0o600))
	l2 := layerPass(t, root, "s3", layerBase(t, l, a.indexRaw), a.indexRaw, l.raw)
	if l2.object.Layer.Depth != 2 || l2.object.Layer.Parent != l.res.Index.Sha256 || l2.res.Read.Files != 1 {
		t.Fatalf("depth %d, parent %s, %d files read", l2.object.Layer.Depth, l2.object.Layer.Parent, l2.res.Read.Files)
	}
	if got := manifestOf(t, l2.composed, l2.res.Selection); withoutKeys(t, got) != withoutKeys(t, packManifest(t, root)) {
		t.Fatal("the second layer's composed manifest is not the tree's")
	}
}

func TestAChainIsRefusedUnlessEachLayerNamesTheObjectBeneathIt(t *testing.T) {
	root := tree(t)
	a, err := backup(t, root, "s1", nil)
	must(t, err)
	other, err := backup(t, tree(t), "o1", nil)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("changed"), 0o644))
	l := layerPass(t, root, "s2", baseOf(a), a.indexRaw)

	relayer := func(edit func(*Index)) []byte {
		x, err := decodeObject(bytes.NewReader(l.raw), DefaultLimits)
		must(t, err)
		edit(x)
		var b bytes.Buffer
		must(t, Encode(&b, x))
		return b.Bytes()
	}
	cases := map[string][][]byte{
		"a layer alone":                 {l.raw},
		"over another whole index":      {other.indexRaw, l.raw},
		"a whole index as a layer":      {a.indexRaw, other.indexRaw},
		"a layer claiming depth 2":      {a.indexRaw, relayer(func(x *Index) { x.Layer.Depth = 2 })},
		"a layer naming a foreign pack": {a.indexRaw, relayer(func(x *Index) { x.Chunks[0].Pack = 7 })},
		"a layer listing a name twice":  {a.indexRaw, relayer(func(x *Index) { x.Entries = append(x.Entries, x.Entries[0]) })},
		"deeper than MaxDepth":          slices.Repeat([][]byte{a.indexRaw}, MaxDepth+2),
	}
	for name, chain := range cases {
		if _, _, err := DecodeChain(chain, DefaultLimits); codeOf(err) != "bad_request" {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A pass whose base chain does not hold together is refused before any byte: base_unusable.
	bad := layerBase(t, l, other.indexRaw)
	if _, err := backup(t, root, "s3", bad); codeOf(err) != "base_unusable" {
		t.Fatalf("a base over the wrong chain: %v", err)
	}
}

func TestARestoredTreesLayerKeepsItsParentsKeysAndTheStatsFileTheTreesOwn(t *testing.T) {
	root := tree(t)
	a, err := backup(t, root, "s1", nil)
	must(t, err)
	// Every regular file's ctime moves (as in a tree restored elsewhere: new inodes, new ctimes), content unchanged.
	must(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			return os.Chmod(p, info.Mode().Perm())
		}
		return err
	}))
	l := layerPass(t, root, "s2", baseOf(a), a.indexRaw)
	if len(l.object.Entries) != 0 || len(l.object.Layer.Removed) != 0 || l.res.Pack != nil {
		t.Fatalf("the layer holds %q (removes %q): only keys changed", paths(l.object.Entries), l.object.Layer.Removed)
	}
	if got := manifestOf(t, l.composed, l.res.Selection); !bytes.Equal(got, l.manifest) {
		t.Fatal("the composed index's manifest is not the pass's")
	}
	raw := unzstd(t, must2(os.ReadFile(l.stats)))
	var s StatsFile
	must(t, json.Unmarshal(raw, &s))
	if s.Index != l.res.Index.Sha256 || len(s.Files) == 0 {
		t.Fatalf("the stats file is bound to %s with %d keys", s.Index, len(s.Files))
	}
	// The next pass here, given the stats file, opens nothing.
	base := layerBase(t, l, a.indexRaw)
	base.Stat = l.stats
	l2 := layerPass(t, root, "s3", base, a.indexRaw, l.raw)
	if l2.res.Read.Files != 0 || len(l2.object.Entries) != 0 {
		t.Fatalf("the pass after read %d files and layered %q", l2.res.Read.Files, paths(l2.object.Entries))
	}
}

// Its layers, together, are not small beside the small tree's whole index: no rebase (below), a whole index.
func TestAPassOverABaseMaxDepthDeepWritesAWholeIndex(t *testing.T) {
	root := tree(t)
	a, err := backup(t, root, "s0", nil)
	must(t, err)
	chain := [][]byte{a.indexRaw}
	base := baseOf(a)
	for i := 1; i <= MaxDepth; i++ {
		must(t, os.WriteFile(filepath.Join(root, "a.txt"), random(int64(i), 100+i), 0o644))
		l := layerPass(t, root, "s"+string(rune('0'+i)), base, chain...)
		if l.object.Layer == nil || l.object.Layer.Depth != i {
			t.Fatalf("pass %d: not a layer at depth %d", i, i)
		}
		base = layerBase(t, l, chain...)
		chain = append(chain, l.raw)
	}
	must(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("the last"), 0o644))
	dir := t.TempDir()
	res, err := Backup(Options{Root: root, Manifest: filepath.Join(dir, "m.json"), Index: filepath.Join(dir, "i.zst"), Name: "s9", AvgChunk: avg, Selection: selection, Base: base, Layer: true}, &memSink{})
	must(t, err)
	x, err := Decode(bytes.NewReader(must2(os.ReadFile(filepath.Join(dir, "i.zst")))), DefaultLimits)
	must(t, err)
	if res.Depth != 0 || res.Read.Files != 1 || len(x.Entries) != len(a.index.Entries) {
		t.Fatalf("over a base %d deep: depth %d, %d files read, %d entries", MaxDepth, res.Depth, res.Read.Files, len(x.Entries))
	}
}

// A base MaxDepth deep whose layers are small beside the whole index: the pass's layer lies over the whole index
// (depth 1) and holds what every layer between changed, names removed in them included; composed, it is the tree a
// whole index of the same pass gives, and every file reads back, the ones written by layers between too.
func TestAPassOverABaseMaxDepthDeepRebasesOntoTheWholeIndex(t *testing.T) {
	root := tree(t)
	for i := range 400 { // a whole index the layers are small beside
		must(t, os.WriteFile(filepath.Join(root, "d", fmt.Sprintf("n%03d.js", i)), []byte(fmt.Sprintf("module.exports = %d\n", i)), 0o644))
	}
	a, err := backup(t, root, "s0", nil)
	must(t, err)
	chain := [][]byte{a.indexRaw}
	base := baseOf(a)
	packs := map[string][]byte{"s0": a.pack}
	for i := 1; i <= MaxDepth; i++ {
		must(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("c%d.bin", i)), random(int64(i), 5000+i), 0o644))
		if i == 3 {
			must(t, os.Remove(filepath.Join(root, "d/n007.js")))
		}
		l := layerPass(t, root, fmt.Sprintf("s%d", i), base, chain...)
		packs[fmt.Sprintf("s%d", i)] = l.pack
		base = layerBase(t, l, chain...)
		chain = append(chain, l.raw)
	}
	must(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("the last"), 0o644))
	l := layerPass(t, root, "s9", base, chain[0])
	packs["s9"] = l.pack
	if l.res.Depth != 1 || l.object.Layer.Parent != sum(chain[0]) {
		t.Fatalf("over a base %d deep: depth %d, over %s", MaxDepth, l.res.Depth, l.object.Layer.Parent)
	}
	if !slices.Equal(l.object.Layer.Removed, []string{"d/n007.js"}) {
		t.Fatalf("removed %v", l.object.Layer.Removed)
	}
	if got := paths(l.object.Entries); len(got) > MaxDepth+4 {
		t.Fatalf("the rebased layer holds %d entries: %v", len(got), got)
	}
	whole, err := backup(t, root, "s10", base)
	must(t, err)
	if withoutKeys(t, manifestOf(t, l.composed, nil)) != withoutKeys(t, whole.manifest) {
		t.Fatal("the rebased chain does not compose to the tree")
	}
	files := restoreInMemory(t, l.composed, packs)
	if string(files["a.txt"]) != "the last" || !bytes.Equal(files["c3.bin"], random(3, 5003)) || files["d/n007.js"] != nil {
		t.Fatal("the rebased chain does not read back")
	}
}

func must2[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// withoutKeys is a manifest's entries without their lstat keys.
func withoutKeys(t *testing.T, manifest []byte) string {
	t.Helper()
	var m struct {
		Entries []map[string]any `json:"entries"`
	}
	must(t, json.Unmarshal(manifest, &m))
	for _, e := range m.Entries {
		delete(e, "stat")
	}
	b, err := json.Marshal(m.Entries)
	must(t, err)
	return string(b)
}

func TestACompactionOverALayeredBaseKeepsTheLayersChunks(t *testing.T) {
	root := tree(t)
	a, err := backup(t, root, "s1", nil)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "layered.txt"), []byte("in the base's layer\n"), 0o644))
	l := layerPass(t, root, "s2", baseOf(a), a.indexRaw)
	merged, layer, upper := overlayOver(t, root, func(layer string) {
		must(t, os.WriteFile(filepath.Join(layer, "delta.txt"), []byte("in a delta"), 0o644))
	})
	base := layerBase(t, l, a.indexRaw)
	base.Layers = []string{layer, upper}
	dir := t.TempDir()
	sink := &memSink{}
	// (a compaction asks for a whole index: the Worker gives no layer)
	res, err := Backup(Options{Root: merged, Index: filepath.Join(dir, "i.zst"), Name: "c1", AvgChunk: avg, Selection: selection, Base: base}, sink)
	must(t, err)
	x, err := Decode(bytes.NewReader(must2(os.ReadFile(filepath.Join(dir, "i.zst")))), DefaultLimits)
	must(t, err)
	names := []string{}
	for _, p := range res.Packs {
		names = append(names, p.Name)
	}
	if res.Depth != 0 || !slices.Equal(names, []string{"s1", "s2", "c1"}) {
		t.Fatalf("a compaction over a layer: depth %d, packs %q", res.Depth, names)
	}
	files := restoreInMemory(t, x, map[string][]byte{"s1": a.pack, "s2": l.pack, "c1": sink.Bytes()})
	if string(files["layered.txt"]) != "in the base's layer\n" || string(files["delta.txt"]) != "in a delta" {
		t.Fatal("the compaction's index does not read back as the merged tree")
	}
}

package filecas

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"testing"

	"snapflow/native/lazy/internal/pack"
)

// BenchmarkDecodeChain: a wake's index read, a whole index (CHAIN_INDEX, e.g. the npm workspace's, kept by a wake)
// under 0 to MaxDepth small layers (8 new files each, as a sleep of the sleep-wake race writes).
func BenchmarkDecodeChain(b *testing.B) {
	path := os.Getenv("CHAIN_INDEX")
	if path == "" {
		b.Skip("CHAIN_INDEX names a whole index file")
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	base, err := Decode(bytes.NewReader(whole), DefaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	objects := [][]byte{whole}
	packs, chunks := len(base.Packs), len(base.Chunks)
	for k := 1; k <= MaxDepth; k++ {
		l := &Index{Version: LayerVersion, AvgChunk: base.AvgChunk, Layer: &Layer{Parent: sum(objects[k-1]), Depth: k, Removed: []string{}}}
		l.Packs = []Pack{{Name: fmt.Sprintf("bk-2026112700000%d-00000000", k), Bytes: 8 << 20, Sha256: sum([]byte{byte(k)})}}
		l.Entries = []Entry{{Entry: pack.Entry{Path: fmt.Sprintf("zz-change-%d", k), Type: "dir", Mode: 0o755}}}
		for i := range 8 {
			l.Chunks = append(l.Chunks, Chunk{Sha256: sum([]byte{byte(k), byte(i)}), Pack: packs, Offset: int64(i) << 20, Stored: 1 << 20, Size: 1 << 20})
			l.Entries = append(l.Entries, Entry{Entry: pack.Entry{Path: fmt.Sprintf("zz-change-%d/f%d.bin", k, i), Type: "file", Mode: 0o644, Size: 1 << 20, Sha256: sum([]byte{byte(k), byte(i)})}, Chunks: []int{chunks + i}})
		}
		packs, chunks = packs+1, chunks+8
		var buf bytes.Buffer
		if err := Encode(&buf, l); err != nil {
			b.Fatal(err)
		}
		objects = append(objects, buf.Bytes())
	}
	for _, depth := range []int{0, 1, 4, 8} {
		b.Run(fmt.Sprintf("depth-%d", depth), func(b *testing.B) {
			for b.Loop() {
				if _, got, err := DecodeChain(objects[:depth+1], DefaultLimits); err != nil || got != depth {
					b.Fatal(err, got)
				}
			}
		})
	}
}

// layerObject encodes a layer over the object parent: entries (in walk order, no content) and the names it removes.
func layerObject(t *testing.T, parent []byte, depth int, removed []string, paths ...string) []byte {
	t.Helper()
	l := &Index{Version: LayerVersion, AvgChunk: avg, Packs: []Pack{}, Chunks: []Chunk{}, Layer: &Layer{Parent: sum(parent), Depth: depth, Removed: removed}}
	for _, p := range paths {
		l.Entries = append(l.Entries, Entry{Entry: pack.Entry{Path: p, Type: "dir", Mode: 0o700 + uint32(depth)}})
	}
	var buf bytes.Buffer
	must(t, Encode(&buf, l))
	return buf.Bytes()
}

// A chain composed at once is what laying each layer in turn gives: a name removed by one layer and made again by a
// later one, a layer's name removed by the next, a replaced entry taking the last layer's fields, new names in walk
// order wherever they fall.
func TestAChainComposesAsItsLayersLaidInTurn(t *testing.T) {
	whole := &Index{Version: Version, AvgChunk: avg, Packs: []Pack{}, Chunks: []Chunk{}}
	for _, p := range []string{"a", "b", "b/c", "d", "e"} {
		whole.Entries = append(whole.Entries, Entry{Entry: pack.Entry{Path: p, Type: "dir", Mode: 0o755}})
	}
	var buf bytes.Buffer
	must(t, Encode(&buf, whole))
	o0 := buf.Bytes()
	o1 := layerObject(t, o0, 1, []string{"d", "b/c"}, "a", "a/x", "c")
	o2 := layerObject(t, o1, 2, []string{"a/x"}, "a", "b/c", "zz")
	o3 := layerObject(t, o2, 3, []string{"e"}, "a/y", "b", "d")
	x, depth, err := DecodeChain([][]byte{o0, o1, o2, o3}, DefaultLimits)
	must(t, err)
	got := []string{}
	for _, e := range x.Entries {
		got = append(got, fmt.Sprintf("%s:%o", e.Path, e.Mode))
	}
	want := []string{"a:702", "a/y:703", "b:703", "b/c:702", "c:701", "d:703", "zz:702"}
	if depth != 3 || !slices.Equal(got, want) {
		t.Fatalf("depth %d, entries %v; want %v", depth, got, want)
	}
}

// What runs beside validation (a lazy mount's layout) sees the composed index, yet its work stands only if the index
// is valid: a name leading outside the tree is refused whatever beside made of it, and beside's own failure is the
// answer for a valid index. (Run with -race: beside reads what validation fills in beside it.)
func TestWorkBesideValidationStandsOnlyForAValidIndex(t *testing.T) {
	encode := func(paths ...string) []byte {
		x := &Index{Version: Version, AvgChunk: avg, Packs: []Pack{}, Chunks: []Chunk{}}
		for _, p := range paths {
			x.Entries = append(x.Entries, Entry{Entry: pack.Entry{Path: p, Type: "dir", Mode: 0o755}})
		}
		var buf bytes.Buffer
		must(t, Encode(&buf, x))
		return buf.Bytes()
	}
	var seen []string
	read := func(x *Index) error {
		seen = seen[:0]
		for _, e := range x.Entries {
			seen = append(seen, e.Path)
		}
		return nil
	}
	good := encode("a", "a/b", "c")
	x, _, err := DecodeChainOf([][]byte{good}, []string{sum(good)}, DefaultLimits, read)
	if err != nil || x == nil || !slices.Equal(seen, []string{"a", "a/b", "c"}) {
		t.Fatalf("a valid index: %v, beside saw %v", err, seen)
	}
	bad := encode("a", "a/../../etc", "c")
	if x, _, err := DecodeChainOf([][]byte{bad}, []string{sum(bad)}, DefaultLimits, read); codeOf(err) != "path_outside_root" || x != nil || len(seen) != 3 {
		t.Fatalf("a name outside the tree: %v (%v), beside saw %v", err, x, seen)
	}
	refusal := &pack.Error{Code: "bad_request", Message: "beside refused"}
	if _, _, err := DecodeChainOf([][]byte{good}, []string{sum(good)}, DefaultLimits, func(*Index) error { return refusal }); err != refusal {
		t.Fatalf("beside's own failure: got %v", err)
	}
}

package filecas

// Layers (issue 24): an incremental whose parent it read stores only what changed, as a layer over the parent's index,
// not the whole index again (2.9 MB for the npm workspace however little changed, against ~0.1 MB for a layer of a
// 10 MB change). A snapshot's index is then a chain: a whole index, then up to MaxDepth layers, each naming the object
// below it by SHA-256. The record vouches for the tip's SHA-256 (and lists the chain, so the store keeps every object
// of it: src/chunks/pack-gc.ts); each layer vouches for its parent's; so a reader checks every object it composes.
//
//	layer (version 4): [Index tuple: version 4, avgChunk, packs new since the parent, chunks new since the parent,
//	                    the entries that differ from the parent's (a new name, or any field but the lstat key)]
//	                   [Layer tuple: parent's SHA-256, depth, names removed]
//
// Composed: the parent's packs then the layer's, the parent's chunks then the layer's (a layer's chunk and pack numbers
// count on from its parent's), and the entries merged in walk order, a layer's entry replacing its parent's of the
// same name and a removed name dropped. A chunk no entry names any more is still listed: its pack is kept until the
// chain is written whole again (a compaction, or a pass over MaxDepth layers that have outgrown their rebase).
//
// Rebased: a pass over a base MaxDepth deep writes its layer over the chain's whole index instead (depth 1): it holds
// every entry that differs from the whole index's (what all the layers between changed, and this pass), their chunks
// and packs, numbered as the base numbers them, which count on from the whole index's. So a workspace that sleeps
// as layers stores what each sleep changed, never the whole index, until the layers together outgrow a quarter of it
// (pack_base.go rebaseOver): then a whole index.
//
// An entry whose only change is its lstat key (a tree restored from the index, where every inode and ctime is new)
// keeps its parent's key: the key only decides what the next backup reads, and that sandbox keeps its tree's own keys
// beside the index (stats.go). Without that rule a restored tree's first backup would store every entry again.

import (
	"fmt"
	"slices"
	"sync"
)

// MaxDepth is how many layers a chain holds over its whole index: a pass over a base this deep rebases (above).
// Each layer is one more GET for a reader (fetched at once: files-unpack, files-mount) and one more decode; 8 keeps a
// wake's index read within one round trip of a whole index's while an hourly backup writes a whole index ~3× a day.
// The agent's protocol repeats it (container/contract/protocol/trees.ts FILES_MAX_DEPTH).
const MaxDepth = 8

// DecodeChain reads a snapshot's index from its objects, the whole index first and the snapshot's own last (its SHA-256
// is the caller's to check against the record): each layer must name the object before it by SHA-256 and lie one
// deeper. The composed index is validated as a whole index is; depth is the tip's (0: a whole index).
func DecodeChain(objects [][]byte, l Limits) (x *Index, depth int, err error) {
	return DecodeChainOf(objects, nil, l, nil)
}

// DecodeChainOf is DecodeChain given each object's SHA-256 (shas[i], hex), which the caller checks against the bytes
// itself (it may do so while this decodes): the layers' parents are compared with those, not hashed again. nil: each
// object beneath a layer is hashed here. `beside`, when given, runs on the composed index on another goroutine while
// it is validated (a lazy mount lays out its tree meanwhile: ~8 ms each for the npm workspace's): it may only read
// the entries' names, types and links (validation fills in elided hashes), must end on any input, and what it made
// is the caller's to use only when this returns no error; its own error is returned when validation passed.
func DecodeChainOf(objects [][]byte, shas []string, l Limits, beside func(*Index) error) (x *Index, depth int, err error) {
	if shas != nil && len(shas) != len(objects) {
		return nil, 0, refused("chain", fmt.Sprintf("%d SHA-256s for %d objects", len(shas), len(objects)))
	}
	shaOf := func(i int) string {
		if shas != nil {
			return shas[i]
		}
		return sum(objects[i])
	}
	if len(objects) == 0 {
		return nil, 0, refused("chain", "no index object")
	}
	if len(objects)-1 > MaxDepth {
		return nil, 0, refused("chain", fmt.Sprintf("%d layers over the whole index; at most %d are read", len(objects)-1, MaxDepth))
	}
	var layers []*Index
	for i, body := range objects {
		o, err := decodeBytes(body, l)
		if err != nil {
			return nil, 0, err
		}
		switch {
		case i == 0 && o.Layer != nil:
			return nil, 0, refused("chain", "the chain's first object is a layer over "+o.Layer.Parent+", not a whole index")
		case i == 0:
			x = o
			continue
		case o.Layer == nil:
			return nil, 0, refused("chain", fmt.Sprintf("object %d of the chain is a whole index, not a layer", i))
		case o.Layer.Parent != shaOf(i-1):
			return nil, 0, refused("chain", fmt.Sprintf("layer %d names parent %s; the object before it is %s", i, o.Layer.Parent, shaOf(i-1)))
		case o.Layer.Depth != i:
			return nil, 0, refused("chain", fmt.Sprintf("layer %d says it is at depth %d", i, o.Layer.Depth))
		}
		layers = append(layers, o)
	}
	if len(layers) > 0 {
		var err error
		if x, err = compose(x, layers); err != nil {
			return nil, 0, err
		}
	}
	if beside == nil {
		if err := x.finish(l); err != nil {
			return nil, 0, err
		}
		return x, len(objects) - 1, nil
	}
	made := make(chan error, 1)
	go func() { made <- beside(x) }()
	ferr := x.finish(l)
	if berr := <-made; ferr == nil && berr != nil {
		ferr = berr
	}
	if ferr != nil {
		return nil, 0, ferr
	}
	return x, len(objects) - 1, nil
}

// ReadChain reads a chain's n objects at once (read(i) is object i, the whole index first): their bodies, or the
// first failure in chain order with its place.
func ReadChain(n int, read func(i int) ([]byte, error)) ([][]byte, int, error) {
	bodies := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i], errs[i] = read(i)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, i, err
		}
	}
	return bodies, -1, nil
}

// compose lays the layers, lowest first, over the whole index x (none validated yet: the caller validates what they
// make). Their net change is folded first — by path, the last layer's entry, or removed — and applied in one pass
// over x's entries: a layer's new names are placed by binary search in x's walk order. Merging layer by layer made a
// copy of every entry per layer and compared most paths once each (a wake 8 layers deep read its index in ~5× the
// time of a whole one: BenchmarkDecodeChain).
func compose(x *Index, layers []*Index) (*Index, error) {
	upsert := map[string]*Entry{}
	removed := map[string]struct{}{}
	packs, chunks := len(x.Packs), len(x.Chunks)
	for _, layer := range layers {
		n := layer.Entries
		for i := 1; i < len(n); i++ {
			if walkOrder(n[i-1].Path, n[i].Path) >= 0 {
				return nil, refused("entries", fmt.Sprintf("the layer lists %q after %q: not in walk order", n[i].Path, n[i-1].Path))
			}
		}
		// A layer's removals are of the index beneath it; its own entries stand.
		for _, p := range layer.Layer.Removed {
			delete(upsert, p)
			removed[p] = struct{}{}
		}
		for i := range n {
			upsert[n[i].Path] = &n[i]
			delete(removed, n[i].Path)
		}
		packs, chunks = packs+len(layer.Packs), chunks+len(layer.Chunks)
	}
	out := &Index{Version: Version, AvgChunk: layers[len(layers)-1].AvgChunk, Packs: make([]Pack, 0, packs), Chunks: make([]Chunk, 0, chunks)}
	out.Packs, out.Chunks = append(out.Packs, x.Packs...), append(out.Chunks, x.Chunks...)
	for _, layer := range layers {
		out.Packs, out.Chunks = append(out.Packs, layer.Packs...), append(out.Chunks, layer.Chunks...)
	}
	// The names x lacks, each with the place in x's entries it goes before.
	type added struct {
		at int
		e  *Entry
	}
	var adds []added
	for path, e := range upsert {
		at, found, err := placeOf(x.Entries, path)
		if err != nil {
			return nil, err
		}
		if !found {
			adds = append(adds, added{at, e})
		}
	}
	slices.SortFunc(adds, func(a, b added) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return walkOrder(a.e.Path, b.e.Path)
	})
	out.Entries = make([]Entry, 0, len(x.Entries)+len(adds))
	for i := range x.Entries {
		for len(adds) > 0 && adds[0].at == i {
			out.Entries = append(out.Entries, *adds[0].e)
			adds = adds[1:]
		}
		e := &x.Entries[i]
		if _, gone := removed[e.Path]; gone {
			continue
		}
		if u, ok := upsert[e.Path]; ok {
			e = u
		}
		out.Entries = append(out.Entries, *e)
	}
	for _, a := range adds {
		out.Entries = append(out.Entries, *a.e)
	}
	return out, nil
}

// placeOf finds path among entries in walk order: its index if there, else where it would go.
func placeOf(entries []Entry, path string) (int, bool, error) {
	var err error
	at, found := slices.BinarySearchFunc(entries, path, func(e Entry, p string) int {
		c := walkOrder(e.Path, p)
		if c == 0 && e.Path != p && err == nil {
			err = refused("entries", fmt.Sprintf("%q and %q cannot be ordered (not UTF-8)", e.Path, p))
		}
		return c
	})
	return at, found, err
}

// LayerNames answers the names a layer object sets (its own entries, in walk order): what it changed over the index
// beneath it. A content check of a snapshot whose index beneath was checked need hash only these (files-check). A
// whole index is not a layer: refused, naming layerOnly.
func LayerNames(object []byte, l Limits) (map[string]struct{}, error) {
	x, err := decodeBytes(object, l)
	if err != nil {
		return nil, err
	}
	if x.Layer == nil {
		return nil, &Error{Code: "bad_request", Field: "layerOnly", Message: "layerOnly: the snapshot's index is whole, not a layer over another"}
	}
	names := make(map[string]struct{}, len(x.Entries))
	for i := range x.Entries {
		names[x.Entries[i].Path] = struct{}{}
	}
	return names, nil
}

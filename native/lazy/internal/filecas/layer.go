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
// chain is written whole again (at MaxDepth, or by a compaction).
//
// An entry whose only change is its lstat key (a tree restored from the index, where every inode and ctime is new)
// keeps its parent's key: the key only decides what the next backup reads, and that sandbox keeps its tree's own keys
// beside the index (stats.go). Without that rule a restored tree's first backup would store every entry again.

import (
	"bytes"
	"fmt"
	"sync"
)

// MaxDepth is how many layers a chain holds over its whole index: a pass over a base this deep writes a whole index.
// Each layer is one more GET for a reader (fetched at once: files-unpack, files-mount) and one more decode; 8 keeps a
// wake's index read within one round trip of a whole index's while an hourly backup writes a whole index ~3× a day.
// The agent's protocol repeats it (container/contract/protocol/trees.ts FILES_MAX_DEPTH).
const MaxDepth = 8

// DecodeChain reads a snapshot's index from its objects, the whole index first and the snapshot's own last (its SHA-256
// is the caller's to check against the record): each layer must name the object before it by SHA-256 and lie one
// deeper. The composed index is validated as a whole index is; depth is the tip's (0: a whole index).
func DecodeChain(objects [][]byte, l Limits) (x *Index, depth int, err error) {
	if len(objects) == 0 {
		return nil, 0, refused("chain", "no index object")
	}
	if len(objects)-1 > MaxDepth {
		return nil, 0, refused("chain", fmt.Sprintf("%d layers over the whole index; at most %d are read", len(objects)-1, MaxDepth))
	}
	for i, body := range objects {
		o, err := decodeObject(bytes.NewReader(body), l)
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
		case o.Layer.Parent != sum(objects[i-1]):
			return nil, 0, refused("chain", fmt.Sprintf("layer %d names parent %s; the object before it is %s", i, o.Layer.Parent, sum(objects[i-1])))
		case o.Layer.Depth != i:
			return nil, 0, refused("chain", fmt.Sprintf("layer %d says it is at depth %d", i, o.Layer.Depth))
		}
		if x, err = compose(x, o); err != nil {
			return nil, 0, err
		}
	}
	if err := x.finish(l); err != nil {
		return nil, 0, err
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

// compose lays layer over parent (neither validated yet: the caller validates what they make).
func compose(parent, layer *Index) (*Index, error) {
	removed := make(map[string]struct{}, len(layer.Layer.Removed))
	for _, p := range layer.Layer.Removed {
		removed[p] = struct{}{}
	}
	x := &Index{Version: Version, AvgChunk: layer.AvgChunk}
	x.Packs = append(append(make([]Pack, 0, len(parent.Packs)+len(layer.Packs)), parent.Packs...), layer.Packs...)
	x.Chunks = append(append(make([]Chunk, 0, len(parent.Chunks)+len(layer.Chunks)), parent.Chunks...), layer.Chunks...)
	x.Entries = make([]Entry, 0, len(parent.Entries)+len(layer.Entries))
	p, n := parent.Entries, layer.Entries
	for i := 1; i < len(n); i++ {
		if walkOrder(n[i-1].Path, n[i].Path) >= 0 {
			return nil, refused("entries", fmt.Sprintf("the layer lists %q after %q: not in walk order", n[i].Path, n[i-1].Path))
		}
	}
	for len(p) > 0 || len(n) > 0 {
		c := 1 // only the layer's entries are left
		switch {
		case len(n) == 0:
			c = -1
		case len(p) > 0:
			if c = walkOrder(p[0].Path, n[0].Path); c == 0 && p[0].Path != n[0].Path {
				return nil, refused("entries", fmt.Sprintf("%q and %q cannot be ordered (not UTF-8)", p[0].Path, n[0].Path))
			}
		}
		switch {
		case c < 0:
			if _, gone := removed[p[0].Path]; !gone {
				x.Entries = append(x.Entries, p[0])
			}
			p = p[1:]
		case c == 0: // the layer's entry replaces its parent's
			p = p[1:]
			fallthrough
		default:
			x.Entries = append(x.Entries, n[0])
			n = n[1:]
		}
	}
	return x, nil
}

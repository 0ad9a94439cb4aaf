package filecas

import "encoding/hex"

// chunkTable is the new index's chunks, in the order this pass first referenced them: the base's it reuses (an
// unchanged file's, or a read file's chunk the base had) and its own new ones. A chunk nothing references any more
// is not carried, nor a base pack none of the carried chunks lives in.
type chunkTable struct {
	base   *Index
	baseBy map[string]int
	// fromBase: the new index of each base chunk referenced, -1 for the others
	fromBase []int
	// refs: the new index's chunks; Pack is the base's pack index, or newPack for a chunk of this pass's pack (its
	// Offset and Stored are set when its frame is written)
	refs []*Chunk
	// bySha: the new index of each chunk of this pass's pack
	bySha map[string]int
	// from: a layer's first chunk and pack, the counts of the index it lies over (the base's own, unless rebased)
	from [2]int
}

const newPack = -1

// newChunkTable: over a base a layer is written on (layer.go), every base chunk keeps its number and the new ones
// count on from them; otherwise only the chunks referenced are carried, renumbered.
func newChunkTable(base *Index, layer bool) *chunkTable {
	t := &chunkTable{bySha: map[string]int{}}
	if base != nil {
		t.base = base
		t.baseBy = make(map[string]int, len(base.Chunks))
		t.fromBase = make([]int, len(base.Chunks))
		if layer {
			t.refs = make([]*Chunk, len(base.Chunks))
		}
		for i, c := range base.Chunks {
			t.baseBy[c.Sha256] = i
			t.fromBase[i] = -1
			if layer {
				t.refs[i], t.fromBase[i] = &base.Chunks[i], i
			}
		}
	}
	return t
}

// layer is the layer's own packs and chunks: this pass's pack (when it wrote any byte) and the chunks new in it,
// numbered after the base's (the layer's packs and chunks count on from its parent's). Its entries are left out.
func (t *chunkTable) layer(avg int, name string, written *counted) *Index {
	x := &Index{Version: LayerVersion, AvgChunk: avg, Packs: append([]Pack{}, t.base.Packs[t.from[1]:]...), Chunks: make([]Chunk, 0, len(t.refs)-t.from[0])}
	if written.n > 0 {
		x.Packs = append(x.Packs, Pack{Name: name, Bytes: written.n, Sha256: hex.EncodeToString(written.h.Sum(nil))})
	}
	// (rebased: the base's chunks past the whole index's too, each in its own pack, numbered as the base numbers them)
	for _, c := range t.refs[t.from[0]:] {
		x.Chunks = append(x.Chunks, *c)
		if c.Pack == newPack {
			x.Chunks[len(x.Chunks)-1].Pack = len(t.base.Packs)
		}
	}
	return x
}

// refBase is the new index of the base's chunk i.
func (t *chunkTable) refBase(i int) int {
	if at := t.fromBase[i]; at >= 0 {
		return at
	}
	c := t.base.Chunks[i]
	t.refs = append(t.refs, &c)
	t.fromBase[i] = len(t.refs) - 1
	return t.fromBase[i]
}

// lookup is the new index of the chunk whose SHA-256 is sum and size is size, and whether it is new: then its entry
// (to be placed when its frame is written) is fresh.
func (t *chunkTable) lookup(sum [32]byte, size int64) (int, *Chunk) {
	name := hex.EncodeToString(sum[:])
	if at, ok := t.bySha[name]; ok {
		return at, nil
	}
	if i, ok := t.baseBy[name]; ok && t.base.Chunks[i].Size == size {
		return t.refBase(i), nil
	}
	c := &Chunk{Sha256: name, Pack: newPack, Size: size}
	t.refs = append(t.refs, c)
	t.bySha[name] = len(t.refs) - 1
	return len(t.refs) - 1, c
}

// index is the new index: the base's packs still referenced (in the base's order), then this pass's (named name,
// when it wrote any byte), and the chunks with their packs renumbered.
// Its entries are left out: the emitter holds them encoded.
func (t *chunkTable) index(avg int, name string, written *counted) *Index {
	x := &Index{Version: Version, AvgChunk: avg, Packs: []Pack{}, Chunks: make([]Chunk, len(t.refs))}
	renumber := map[int]int{}
	if t.base != nil {
		used := make([]bool, len(t.base.Packs))
		for _, c := range t.refs {
			if c.Pack != newPack {
				used[c.Pack] = true
			}
		}
		for i, p := range t.base.Packs {
			if used[i] {
				renumber[i] = len(x.Packs)
				x.Packs = append(x.Packs, p)
			}
		}
	}
	if written.n > 0 {
		renumber[newPack] = len(x.Packs)
		x.Packs = append(x.Packs, Pack{Name: name, Bytes: written.n, Sha256: hex.EncodeToString(written.h.Sum(nil))})
	}
	for i, c := range t.refs {
		x.Chunks[i] = *c
		x.Chunks[i].Pack = renumber[c.Pack]
	}
	return x
}

package filecas

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"

	"snapflow/native/lazy/internal/pack"
)

// indexFile is the index being written beside its final name (pack.TempManifest's: the command removes it on
// SIGTERM), renamed over it only once the pass has succeeded: a kept base at the same name stays until then.
type indexFile struct {
	final, tmp string
	f          *os.File
}

func newIndexFile(final string) (*indexFile, error) {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return nil, err
	}
	tmp := pack.TempManifest(final)
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	return &indexFile{final: final, tmp: tmp, f: f}, nil
}

// write writes the index whose entries (left out of idx: n of them) the emitter has compressed, as a zstd frame
// holding the rest of the index's MessagePack: the head (the Index tuple's fields before its entries, and the
// entry list's length) goes before it in a frame of its own. One zstd stream (frames concatenated), whose content is
// what Encode writes for the whole index; a layer's tuple follows in a frame of its own (layer.go).
func (x *indexFile) write(idx *Index, n int, entries []byte) (IndexMade, error) {
	out := &counted{w: x.f, h: sha256.New()}
	head, err := appendIndexHead(nil, idx, n)
	if err != nil {
		return IndexMade{}, err
	}
	enc, err := zstd.NewWriter(out, zstd.WithEncoderLevel(indexLevel))
	if err != nil {
		return IndexMade{}, err
	}
	_, err = enc.Write(head)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_, err = out.Write(entries)
	}
	if err == nil && idx.Layer != nil {
		// A layer's tuple follows its entries, in a frame of its own.
		var b []byte
		if b, err = idx.Layer.MarshalMsg(nil); err == nil {
			err = writeFrame(out, b)
		}
	}
	if err == nil {
		err = x.f.Close()
	}
	if err != nil {
		return IndexMade{}, err
	}
	return IndexMade{Bytes: out.n, Sha256: hex.EncodeToString(out.h.Sum(nil)), Chunks: len(idx.Chunks)}, nil
}

// appendIndexHead appends the Index tuple (index_types_gen.go's MarshalMsg) up to its entries, and the header of an
// entry list of n: followed by n entry tuples it is the whole index.
func appendIndexHead(b []byte, idx *Index, n int) ([]byte, error) {
	b = msgp.AppendArrayHeader(b, 5)
	b = msgp.AppendInt(b, idx.Version)
	b = msgp.AppendInt(b, idx.AvgChunk)
	b = msgp.AppendArrayHeader(b, uint32(len(idx.Packs)))
	var err error
	for i := range idx.Packs {
		if b, err = idx.Packs[i].MarshalMsg(b); err != nil {
			return nil, err
		}
	}
	b = msgp.AppendArrayHeader(b, uint32(len(idx.Chunks)))
	for i := range idx.Chunks {
		if b, err = idx.Chunks[i].MarshalMsg(b); err != nil {
			return nil, err
		}
	}
	return msgp.AppendArrayHeader(b, uint32(n)), nil
}

func (x *indexFile) name() error {
	if err := os.Rename(x.tmp, x.final); err != nil {
		os.Remove(x.tmp)
		return err
	}
	return nil
}

func (x *indexFile) abandon() {
	x.f.Close()
	os.Remove(x.tmp)
}

package filecas

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	json "github.com/goccy/go-json"
	"github.com/klauspost/compress/zstd"

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

// write writes the index whose entries (left out of idx) the emitter has compressed, as a zstd frame that holds the
// rest of the JSON: the head goes before it in a frame of its own. One zstd stream (frames concatenated), whose JSON
// is what Encode writes for the whole index.
func (x *indexFile) write(idx *Index, entries []byte) (IndexMade, error) {
	out := &counted{w: x.f, h: sha256.New()}
	head, err := json.Marshal(struct {
		Version  int     `json:"version"`
		AvgChunk int     `json:"avgChunk"`
		Packs    []Pack  `json:"packs"`
		Chunks   []Chunk `json:"chunks"`
	}{idx.Version, idx.AvgChunk, idx.Packs, idx.Chunks})
	if err != nil {
		return IndexMade{}, err
	}
	enc, err := zstd.NewWriter(out, zstd.WithEncoderLevel(indexLevel))
	if err != nil {
		return IndexMade{}, err
	}
	_, err = enc.Write(append(head[:len(head)-1], `,"entries":[`...))
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_, err = out.Write(entries)
	}
	if err == nil {
		err = x.f.Close()
	}
	if err != nil {
		return IndexMade{}, err
	}
	return IndexMade{Bytes: out.n, Sha256: hex.EncodeToString(out.h.Sum(nil)), Chunks: len(idx.Chunks)}, nil
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

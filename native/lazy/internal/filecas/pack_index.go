package filecas

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

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

func (x *indexFile) write(idx *Index) (IndexMade, error) {
	out := &counted{w: x.f, h: sha256.New()}
	if err := Encode(out, idx); err != nil {
		return IndexMade{}, err
	}
	if err := x.f.Close(); err != nil {
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

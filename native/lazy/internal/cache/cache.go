// Package cache is the local, content-addressed chunk cache: one file per verified chunk, named by its SHA-256. A file is
// written under a temporary name and renamed into place only after its bytes were verified, so a name that exists is a
// chunk that is whole and correct — a crash leaves at most a stray temporary file. Being content-addressed, one cache
// directory can serve several images (a fork's restore reuses its parent's chunks).
package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Dir is a chunk cache rooted at a directory.
type Dir struct{ root string }

// Open creates the directory if needed and removes temporaries left by an earlier crash.
func Open(root string) (*Dir, error) {
	if err := os.MkdirAll(filepath.Join(root, "chunks"), 0o755); err != nil {
		return nil, err
	}
	d := &Dir{root: root}
	leftovers, _ := filepath.Glob(filepath.Join(root, "chunks", "*.tmp*"))
	for _, p := range leftovers {
		_ = os.Remove(p)
	}
	return d, nil
}

// Root is the cache directory.
func (d *Dir) Root() string { return d.root }

func (d *Dir) path(sha string) string { return filepath.Join(d.root, "chunks", sha) }

// Has reports whether the chunk is cached with the expected size.
func (d *Dir) Has(sha string, size int64) bool {
	st, err := os.Stat(d.path(sha))
	return err == nil && st.Size() == size
}

// Names lists the cached chunks' names in one directory read: checking each of an index's chunks with a stat costs
// ~30 ms at 8,686 chunks, and a fresh restore's cache is empty.
func (d *Dir) Names() (map[string]bool, error) {
	entries, err := os.ReadDir(filepath.Join(d.root, "chunks"))
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names, nil
}

// Put stores verified bytes under their digest. Callers verify; Put only makes the write atomic.
func (d *Dir) Put(sha string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Join(d.root, "chunks"), sha+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), d.path(sha))
}

// ReadAt reads len(p) bytes of chunk sha starting at off within the chunk.
func (d *Dir) ReadAt(sha string, p []byte, off int64) error {
	f, err := os.Open(d.path(sha))
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || strings.Contains(err.Error(), "EOF") {
		err = fmt.Errorf("cached chunk %s is short", sha)
	}
	return err
}

package pack

// What the file-level engine (internal/filecas) takes from this package, so that for the same tree both engines walk
// the same entries in the same order (the agent's), leave out the same ones (the selection, sockets, the pass's own
// manifest), write the same manifest, read a file's holes alike, and call a file unchanged by the same rule as a delta.

import (
	"fmt"
	"hash"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
)

// Walked is one entry of a pass's walk, from lstat alone (walkTree).
type Walked = walked

func (w *walked) Path() string { return w.path }

// Lstat is the walk's lstat of the entry: what the manifest records and what its read is checked against.
func (w *walked) Lstat() *unix.Stat_t { return &w.st }

// Link is, for a later name of a file with several links, the first name the walk met ("" otherwise).
func (w *walked) Link() string { return w.link }

// Kind is the manifest's type: "file", "dir", "symlink" or "other".
func (w *walked) Kind() string { return w.kind() }

// Pass is a walk of a tree with pack's selection, and the manifest written for it (nameless until Finish).
type Pass struct {
	p         *packer
	m         *manifestWriter
	selection *Selection
	root      int
	host      string
}

// NewPass opens root and the manifest's nameless file. A selection that does not compile is bad_request on
// "selection", as pack's.
func NewPass(root, manifest string, selection *Selection) (*Pass, error) {
	sel, err := compileSelection(selection)
	if err != nil {
		return nil, &Error{Code: "bad_request", Message: err.Error(), Field: "selection"}
	}
	fd, err := beneath.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	m, err := newManifestWriter(manifest)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Pass{p: &packer{sel: sel, writers: []*manifestWriter{m}}, m: m, selection: selection, root: fd, host: root}, nil
}

// Root is the tree's directory descriptor (closed by Abandon or Finish).
func (s *Pass) Root() int { return s.root }

// Walk lists the tree's entries as pack archives them, in its order.
func (s *Pass) Walk() ([]Walked, error) { return s.WalkPruned(nil) }

// WalkPruned is Walk that lists, of a directory for which descend says false, only the directory itself: nothing
// below it is read (filecas lower.go: what no layer over a base touched is the base's, and taken from its index).
// A nil descend walks everything.
func (s *Pass) WalkPruned(descend func(rel string) bool) ([]Walked, error) {
	var out []Walked
	s.p.descend = descend
	err := s.p.walkTree(s.root, "", s.host, &out, map[[2]uint64]string{})
	s.p.descend = nil
	return out, err
}

// Add writes one entry to the manifest (in walk order).
func (s *Pass) Add(e *Entry) error { return s.m.add(e) }

// Finish writes the totals and the selection's record and names the manifest.
func (s *Pass) Finish() error {
	defer unix.Close(s.root)
	return s.m.finish(s.Record())
}

// Record is what the manifest says of the selection (nil: none), once the walk has counted what it excluded.
func (s *Pass) Record() *Record { return selectionRecord(s.selection, s.p.sel) }

// Abandon drops the manifest.
func (s *Pass) Abandon() {
	unix.Close(s.root)
	s.m.abandon()
}

// Summary is what the manifest holds, as pack's Result reports it.
type Summary struct {
	Entries    int            `json:"entries"`
	Totals     Totals         `json:"totals"`
	JSONBytes  int64          `json:"jsonBytes"`
	JSONSha256 string         `json:"jsonSha256"`
	Excluded   map[string]int `json:"excluded"`
}

// Summary is valid once Finish has returned.
func (s *Pass) Summary() Summary {
	return Summary{Entries: s.m.n, Totals: s.m.totals, JSONBytes: s.m.bytes, JSONSha256: fmt.Sprintf("%x", s.m.sha.Sum(nil)), Excluded: s.p.sel.counts}
}

// EntryOf is a walked entry's manifest entry as pack writes it, less what reading a file adds (sha256, holes) and a
// later hard-link name's link and size (its first name's).
func EntryOf(w *Walked) Entry {
	e := entryOf(w.path, &w.st)
	switch e.Type = w.kind(); e.Type {
	case "file":
		e.Size = w.st.Size
	case "symlink":
		e.Target, e.Size = w.target, int64(len(w.target))
	}
	return e
}

// UnchangedFile is restic's rule as a delta's classification applies it (delta_classify.go): type, mode, size,
// mtime, hard-link name and owners agree with old, and the lstat key (inode, device, ns mtime and ctime) has not moved.
func UnchangedFile(w *Walked, old *Entry) bool {
	uid, gid, st := old.UID, old.GID, old.Stat
	b := baseEntry{Path: old.Path, Type: old.Type, Mode: old.Mode, Size: old.Size, Mtime: old.Mtime, UID: &uid, GID: &gid, Target: old.Target, Link: old.Link, Stat: &st}
	return !cheapDiffers(&b, w, w.kind()) && !ownerMoved(&b, w) && w.sameKey(b.Stat)
}

// SameAsEntry is UnchangedFile without the lstat key: for a file whose content is known by other means to be old's
// (filecas: a name an overlay serves from its lowest layer alone, which is old's own index), only what lstat shows
// must agree.
func SameAsEntry(w *Walked, old *Entry) bool {
	uid, gid := old.UID, old.GID
	b := baseEntry{Path: old.Path, Type: old.Type, Mode: old.Mode, Size: old.Size, Mtime: old.Mtime, UID: &uid, GID: &gid, Target: old.Target, Link: old.Link}
	return !cheapDiffers(&b, w, w.kind()) && !ownerMoved(&b, w)
}

// Region is a run of a sparse file's data.
type Region struct{ Offset, Length int64 }

// SparseRegions maps the data of the open file fd as pack does: ok is false for a file pack reads dense; an empty
// region at the size ends the map of a file that ends in a hole.
func SparseRegions(fd int, st *unix.Stat_t) (regions []Region, ok bool, err error) {
	if !looksSparse(st) || st.Size == 0 {
		return nil, false, nil
	}
	rs, ok, err := dataRegions(fd, st.Size)
	for _, r := range rs {
		regions = append(regions, Region{r.offset, r.length})
	}
	return regions, ok, err
}

// Changed is pack's error for a file that changed while it was read.
func Changed(rel, why string) error { return changed(rel, why) }

// HashZeros hashes n zero bytes (a hole, as a sparse file reads back).
func HashZeros(h hash.Hash, n int64) { hashZeros(h, n) }

// ManifestFile is a manifest written entry by entry outside a walk (filecas: a file-level snapshot's manifest, made
// from its index), by the writer a pass uses: the same entries and record make the same bytes.
type ManifestFile struct{ m *manifestWriter }

// NewManifestFile opens the manifest's nameless file beside final.
func NewManifestFile(final string) (*ManifestFile, error) {
	m, err := newManifestWriter(final)
	if err != nil {
		return nil, err
	}
	return &ManifestFile{m: m}, nil
}

// Add writes one entry (in walk order) and counts it in the totals.
func (f *ManifestFile) Add(e *Entry) error { return f.m.add(e) }

// Finish writes the totals and record (nil: none) and names the file; Abandon drops it.
func (f *ManifestFile) Finish(record *Record) (Summary, error) {
	if err := f.m.finish(record); err != nil {
		return Summary{}, err
	}
	return Summary{Entries: f.m.n, Totals: f.m.totals, JSONBytes: f.m.bytes, JSONSha256: fmt.Sprintf("%x", f.m.sha.Sum(nil))}, nil
}

func (f *ManifestFile) Abandon() { f.m.abandon() }

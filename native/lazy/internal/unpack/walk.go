package unpack

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/pack"
)

// Walked is the metadata walk's comparison of the made tree with the manifest (container/manifest/tree-verify.ts
// checkTree): the agent fails the restore with it as "the restored tree".
type Walked struct {
	Equal       bool         `json:"equal"`
	Counts      Counts       `json:"counts"`
	Differences []Difference `json:"differences"`
	Entries     int          `json:"entries"`
	Ms          int64        `json:"ms"`
	// Owners: "compared" when owners were kept and the manifest records them, "not-in-manifest" when it does not
	Owners string `json:"owners,omitempty"`
	// Sparse: "compared" when the manifest has sparse files (their holes were checked)
	Sparse string `json:"sparse,omitempty"`
}

// holeTolerance: below it a hole is block rounding, not sparseness (tree-verify.ts HOLE_TOLERANCE).
const holeTolerance = 64 * 1024

// walkEntry is what lstat says of a made entry, in the manifest's terms (tree-walk.ts).
type walkEntry struct {
	Got
	uid, gid  int64
	allocated int64
}

// Walk reads the tree beneath root back by descriptors, depth first in the agent's order, from lstat alone, and
// compares it with the manifest as the agent's metadata walk does: type, mode, size, mtime (not a symlink's),
// target, hard-link grouping (the first name of an inode in walk order), owners when kept, and holes (a sparse
// file must have at least half of its holes unallocated). Without keepOwners set-id bits are left out of the modes
// (they were cleared). It stands in for the agent's walk when the tree is moved whole into an empty target.
func Walk(root string, x *Expected, keepOwners bool, limit int) (*Walked, error) {
	started := time.Now()
	fd, err := beneath.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	actual := map[string]*walkEntry{}
	var order []string
	firstOf := map[[2]uint64]string{}
	if err := walkDir(fd, "", actual, &order, firstOf); err != nil {
		return nil, err
	}
	d := Differences{limit: 1 << 30}
	strip := func(m int64) int64 {
		if keepOwners {
			return m
		}
		return m &^ 0o6000
	}
	owners, sparse := "", ""
	for _, w := range x.Entries {
		if w.Holes > 0 {
			sparse = "compared"
		}
		if keepOwners {
			if w.UID != nil {
				owners = "compared"
			} else if owners == "" {
				owners = "not-in-manifest"
			}
		}
		g := actual[w.Path]
		if g == nil {
			d.Note(Difference{Path: w.Path, Kind: "missing"})
			continue
		}
		delete(actual, w.Path)
		mode := strip(*w.Mode)
		fields := compare(&Want{Type: w.Type, Mode: &mode, Size: w.Size, Mtime: w.Mtime, Target: w.Target, Link: w.Link}, &Got{Type: g.Type, Mode: strip(g.Mode), Size: g.Size, Mtime: g.Mtime, Target: g.Target, Link: g.Link})
		if keepOwners && w.UID != nil && *w.UID != g.uid {
			fields = append(fields, Field{Name: "uid", Expected: *w.UID, Actual: g.uid})
		}
		if keepOwners && w.GID != nil && *w.GID != g.gid {
			fields = append(fields, Field{Name: "gid", Expected: *w.GID, Actual: g.gid})
		}
		if len(fields) > 0 {
			d.Note(Difference{Path: w.Path, Kind: "changed", Fields: fields})
		}
		if w.Holes > holeTolerance && w.Link == "" && g.Type == "file" {
			if unallocated := max(0, g.Size-g.allocated); unallocated < w.Holes/2 {
				d.Note(Difference{Path: w.Path, Kind: "changed", Fields: []Field{{Name: "holes", Expected: w.Holes, Actual: unallocated}}})
			}
		}
	}
	for _, p := range order {
		if _, left := actual[p]; left {
			d.Note(Difference{Path: p, Kind: "extra"})
		}
	}
	// Named in path order, the first `limit` of them, as the agent's comparison names them.
	slices.SortStableFunc(d.list, func(a, b Difference) int { return pack.CompareUTF16(a.Path, b.Path) })
	if len(d.list) > limit {
		d.list = d.list[:limit]
	}
	if d.list == nil {
		d.list = []Difference{}
	}
	return &Walked{Equal: d.Equal(), Counts: d.counts, Differences: d.list, Entries: len(order), Ms: time.Since(started).Milliseconds(), Owners: owners, Sparse: sparse}, nil
}

func walkDir(dir int, rel string, out map[string]*walkEntry, order *[]string, firstOf map[[2]uint64]string) error {
	names, err := beneath.Names(dir)
	if err != nil {
		return fmt.Errorf("walking %q: %w", rel, err)
	}
	slices.SortFunc(names, pack.CompareUTF16)
	for _, name := range names {
		path := name
		if rel != "" {
			path = rel + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("walking %q: %w", path, err)
		}
		e := &walkEntry{Got: Got{Mode: int64(st.Mode & 0o7777), Size: st.Size, Mtime: st.Mtim.Sec}, uid: int64(st.Uid), gid: int64(st.Gid)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type, e.allocated = "file", st.Blocks*512
			if st.Nlink > 1 {
				inode := [2]uint64{st.Dev, st.Ino}
				if first, ok := firstOf[inode]; ok {
					e.Link = first
				} else {
					firstOf[inode] = path
				}
			}
		case unix.S_IFDIR:
			e.Type, e.Size = "dir", 0
		case unix.S_IFLNK:
			e.Type = "symlink"
			buf := make([]byte, st.Size+1)
			n, err := unix.Readlinkat(dir, name, buf)
			if err != nil {
				return fmt.Errorf("walking %q: %w", path, err)
			}
			e.Target = string(buf[:n])
		default:
			e.Type = "other"
		}
		out[path] = e
		*order = append(*order, path)
		if e.Type == "dir" {
			sub, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("walking %q: %w", path, err)
			}
			err = walkDir(sub, path, out, order, firstOf)
			unix.Close(sub)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

package pack

import (
	"slices"
	"strings"
)

// classification is a delta's walk sorted against its base by metadata, by the agent's rule
// (container/archive/delta.ts classifyByMetadata, which says why each part is so):
//
//	cheap fields  type, mode, size, mtime (s), symlink target, hard-link name, owners  → differ: changed
//	lstat key     inode, device, ns mtime, ns ctime                                     → all equal: unchanged
//	a file whose cheap fields agree but whose key moved (or every file, with rehash) is a suspect: its content is
//	hashed and compared with the base's before it counts as changed; a later hard-link name is never one (its first
//	name's check covers it); a directory, symlink or other entry whose key moved is changed (a header is all it costs)
//	base entries the walk did not meet are deleted, deepest first; the directory each left is changed (its mtime)
type classification struct {
	// changed, by walk index
	changed []bool
	// nChanged counts changed (the agent's changed.size)
	nChanged int
	// suspects: walk indices of files to hash before deciding
	suspects []int
	// baseOf: the base entry of each walk index, -1 for a new entry
	baseOf  []int
	deleted []string
	// seen: the walk index of each path
	seen map[string]int
}

func (c *classification) mark(i int) {
	if !c.changed[i] {
		c.changed[i] = true
		c.nChanged++
	}
}

// classify sorts walk against base (pure: lstat's answers and the base's entries only).
func classify(walk []walked, base *baseManifest, rehash bool) *classification {
	c := &classification{changed: make([]bool, len(walk)), baseOf: make([]int, len(walk))}
	seen := make(map[string]int, len(walk))
	c.seen = seen
	for i := range walk {
		w := &walk[i]
		seen[w.path] = i
		at, ok := base.byPath[w.path]
		if !ok {
			c.baseOf[i] = -1
			c.mark(i)
			continue
		}
		c.baseOf[i] = at
		old := &base.entries[at]
		kind := w.kind()
		switch {
		case cheapDiffers(old, w, kind) || ownerMoved(old, w):
			c.mark(i)
		case kind != "file":
			if !w.sameKey(old.Stat) {
				c.mark(i)
			}
		case w.link == "" && (rehash || !w.sameKey(old.Stat)):
			if old.Sha256 == "" {
				c.mark(i)
			} else {
				c.suspects = append(c.suspects, i)
			}
		}
	}
	for i := range base.entries {
		if _, ok := seen[base.entries[i].Path]; !ok {
			c.deleted = append(c.deleted, base.entries[i].Path)
		}
	}
	slices.SortFunc(c.deleted, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return CompareUTF16(b, a)
	})
	for _, p := range c.deleted {
		if slash := strings.LastIndexByte(p, '/'); slash > 0 {
			if parent, ok := seen[p[:slash]]; ok {
				c.mark(parent)
			}
		}
	}
	return c
}

func cheapDiffers(old *baseEntry, w *walked, kind string) bool {
	return old.Type != kind || old.Mode != w.mode() || old.Size != w.size() || old.Mtime != w.mtime() || old.Target != w.target || old.Link != w.link
}

// ownerMoved: chown moves only the ctime, which the content check would call unchanged; a base without owners
// compares none.
func ownerMoved(old *baseEntry, w *walked) bool {
	return old.UID != nil && (*old.UID != w.st.Uid || old.GID == nil || *old.GID != w.st.Gid)
}

// archiveList is the walk indices to archive, in walk order (delta.ts deltaList): the changed entries, every name of
// a hard-link group with a changed member (so tar records the later names as links to the first), and the parent
// directory of each (its own header: extraction sets its mtime back).
func archiveList(walk []walked, c *classification) []int {
	group := func(w *walked) string {
		if w.link != "" {
			return w.link
		}
		return w.path
	}
	firstNames := map[string]bool{}
	for i := range walk {
		if walk[i].link != "" {
			firstNames[walk[i].link] = true
		}
	}
	changedGroups := map[string]bool{}
	for i := range walk {
		if c.changed[i] && (walk[i].link != "" || firstNames[walk[i].path]) {
			changedGroups[group(&walk[i])] = true
		}
	}
	listed := make([]bool, len(walk))
	for i := range walk {
		w := &walk[i]
		if !c.changed[i] && !(w.kind() == "file" && changedGroups[group(w)]) {
			continue
		}
		listed[i] = true
		if slash := strings.LastIndexByte(w.path, '/'); slash > 0 {
			listed[c.seen[w.path[:slash]]] = true
		}
	}
	var list []int
	for i, ok := range listed {
		if ok {
			list = append(list, i)
		}
	}
	return list
}

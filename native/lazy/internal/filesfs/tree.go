// Package filesfs serves a file-level index (internal/filecas) as a read-only tree over FUSE, before its content is
// downloaded. The tree is laid out from the index at once (tree.go) and answered from memory: lookups, attributes and
// directory listings never wait for the store, and the kernel may cache them for as long as it likes (the tree never
// changes). A file's read finds the chunks under its range (a binary search over the file's segments, content.go);
// each chunk comes from the local content-addressed cache, or is fetched once by a Range GET of its zstd frame in its
// pack, decompressed and checked against its SHA-256 before a byte of it is served or cached: a chunk that cannot be
// had fails the read with EIO, never with other bytes. Meanwhile a prefetcher (prefetch.go) fetches every chunk in
// index order, neighbouring frames of one pack in one Range GET, and status.go reports progress as the image mount's
// status does.
package filesfs

import (
	"fmt"
	"path"
	"strings"

	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/pack"
)

// Tree is an index laid out as inodes: node 0 is the root; a node's parent is always an earlier node, so creating
// them in order creates parents first. A hard link's later names are extra names of its first name's node.
type Tree struct {
	Index *filecas.Index
	Nodes []Node
	Links []Link
	// Kids lists each node's names in the tree (a hard link's further names included): what a directory's lookups and
	// listings answer from.
	Kids [][]Edge
	// Skipped counts device entries: the index may list them, a restore never makes them, and neither does a mount.
	Skipped int
}

// Node is one inode: an index entry, or a directory the index implies (a parent it does not list).
type Node struct {
	Entry  int // index into Index.Entries; -1 for an implied directory (and a root the index does not list)
	Parent int // -1 for the root
	Name   string
	Nlink  uint32
	Dir    bool
}

// Edge is one name in a directory: Name → node Node.
type Edge struct {
	Name string
	Node int
}

// Link is a further name (Parent/Name) for node Node.
type Link struct {
	Parent int
	Name   string
	Node   int
}

// Build lays out a validated index. It refuses what a tree cannot hold: an entry beneath a non-directory, a name
// listed twice through an implied directory, a hard link to something that is not a file's first name.
func Build(x *filecas.Index) (*Tree, error) {
	t := &Tree{Index: x, Nodes: make([]Node, 1, len(x.Entries)+1)}
	t.Nodes[0] = Node{Entry: -1, Parent: -1, Nlink: 2, Dir: true}
	byPath := make(map[string]int, len(x.Entries)+1)
	byPath[""] = 0
	var dirOf func(p string) (int, error)
	dirOf = func(p string) (int, error) {
		if n, ok := byPath[p]; ok {
			if !t.Nodes[n].Dir {
				return 0, refused(p, "has entries beneath it but is not a directory")
			}
			return n, nil
		}
		parent, err := dirOf(parentOf(p))
		if err != nil {
			return 0, err
		}
		t.Nodes = append(t.Nodes, Node{Entry: -1, Parent: parent, Name: path.Base(p), Nlink: 2, Dir: true})
		t.Nodes[parent].Nlink++
		byPath[p] = len(t.Nodes) - 1
		return len(t.Nodes) - 1, nil
	}
	for i := range x.Entries {
		e := &x.Entries[i]
		if e.Link != "" || e.Type == "other" && e.Node != "fifo" {
			if e.Link == "" {
				t.Skipped++
			}
			continue
		}
		if e.Path == "" {
			if e.Type != "dir" {
				return nil, refused(e.Path, "is the root but not a directory")
			}
			t.Nodes[0].Entry = i
			continue
		}
		if n, ok := byPath[e.Path]; ok {
			// A directory implied by entries listed before it: it is this entry.
			if e.Type != "dir" || t.Nodes[n].Entry >= 0 {
				return nil, refused(e.Path, "is listed after entries beneath it, but is not a directory")
			}
			t.Nodes[n].Entry = i
			continue
		}
		parent, err := dirOf(parentOf(e.Path))
		if err != nil {
			return nil, err
		}
		n := Node{Entry: i, Parent: parent, Name: path.Base(e.Path), Nlink: 1, Dir: e.Type == "dir"}
		if n.Dir {
			n.Nlink = 2
			t.Nodes[parent].Nlink++
		}
		t.Nodes = append(t.Nodes, n)
		byPath[e.Path] = len(t.Nodes) - 1
	}
	for i := range x.Entries {
		e := &x.Entries[i]
		if e.Link == "" {
			continue
		}
		target, ok := byPath[e.Link]
		if !ok || t.Nodes[target].Entry < 0 || x.Entries[t.Nodes[target].Entry].Type != "file" {
			return nil, refused(e.Path, fmt.Sprintf("is a hard link to %q, which is not a file listed first", e.Link))
		}
		if _, clash := byPath[e.Path]; clash {
			return nil, refused(e.Path, "is listed twice")
		}
		parent, err := dirOf(parentOf(e.Path))
		if err != nil {
			return nil, err
		}
		t.Links = append(t.Links, Link{Parent: parent, Name: path.Base(e.Path), Node: target})
		byPath[e.Path] = target
		t.Nodes[target].Nlink++
	}
	t.Kids = make([][]Edge, len(t.Nodes))
	for i := 1; i < len(t.Nodes); i++ {
		p := t.Nodes[i].Parent
		t.Kids[p] = append(t.Kids[p], Edge{Name: t.Nodes[i].Name, Node: i})
	}
	for _, l := range t.Links {
		t.Kids[l.Parent] = append(t.Kids[l.Parent], Edge{Name: l.Name, Node: l.Node})
	}
	return t, nil
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func refused(p, why string) error {
	return &pack.Error{Code: "bad_request", Field: "index.entries", Message: fmt.Sprintf("the file-level index is refused: %q %s", p, why)}
}

package filesfs

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"snapflow/native/lazy/internal/filecas"
)

// node is every inode of the tree: its attributes come from its index entry (or are an implied directory's), a
// directory's lookups and listings from the tree's names, and a regular file reads through Content. Inodes are made
// as the kernel looks names up, not all before the mount answers: the tree is already laid out in memory (tree.go),
// and making 31.7k inodes up front cost 20-40 ms of the time to ready.
type node struct {
	fs.Inode
	t     *Tree
	ct    *Content
	n     int
	attrs fuse.Attr
	once  sync.Once
	segs  []segment      // a file's, worked out at its first read
	kids  map[string]int // a directory's names, indexed at its first lookup
}

var (
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeReader     = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
)

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.once.Do(func() {
		n.kids = make(map[string]int, len(n.t.Kids[n.n]))
		for _, k := range n.t.Kids[n.n] {
			n.kids[k.Name] = k.Node
		}
	})
	c, ok := n.kids[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	ch := &node{t: n.t, ct: n.ct, n: c, attrs: attrsOf(n.t, c)}
	out.Attr = ch.attrs
	// The same Ino for every name of a node: go-fuse gives a hard link's names one inode.
	return n.NewInode(ctx, ch, fs.StableAttr{Mode: ch.attrs.Mode & syscall.S_IFMT, Ino: ch.attrs.Ino}), fs.OK
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	kids := n.t.Kids[n.n]
	entries := make([]fuse.DirEntry, len(kids))
	for i, k := range kids {
		a := attrsOf(n.t, k.Node)
		entries[i] = fuse.DirEntry{Name: k.Name, Mode: a.Mode & syscall.S_IFMT, Ino: a.Ino}
	}
	return fs.NewListDirStream(entries), fs.OK
}

// attrsOf is node i's attributes: type and mode, owners, size, times (the entry's ns mtime, as ctime and atime too).
func attrsOf(t *Tree, i int) fuse.Attr {
	nd := &t.Nodes[i]
	a := fuse.Attr{Ino: uint64(i) + 1, Nlink: nd.Nlink, Blksize: 4096}
	if nd.Entry < 0 {
		a.Mode = syscall.S_IFDIR | 0o755
		return a
	}
	e := &t.Index.Entries[nd.Entry]
	a.Mode, a.Uid, a.Gid = e.Mode&0o7777, e.UID, e.GID
	switch e.Type {
	case "dir":
		a.Mode |= syscall.S_IFDIR
	case "file":
		a.Mode |= syscall.S_IFREG
		a.Size = uint64(e.Size)
		a.Blocks = (uint64(dataBytes(e)) + 511) / 512
	case "symlink":
		a.Mode |= syscall.S_IFLNK
		a.Size = uint64(len(e.Target))
	case "other": // only fifos are laid out
		a.Mode |= syscall.S_IFIFO
	}
	sec, nsec := e.Mtime, int64(0)
	if ns, err := strconv.ParseInt(e.Stat.MtimeNs, 10, 64); err == nil {
		sec, nsec = ns/1e9, ns%1e9
		if nsec < 0 {
			sec, nsec = sec-1, nsec+1e9
		}
	}
	a.Mtime, a.Mtimensec = uint64(sec), uint32(nsec)
	a.Ctime, a.Ctimensec, a.Atime, a.Atimensec = a.Mtime, a.Mtimensec, a.Mtime, a.Mtimensec
	return a
}

func dataBytes(e *filecas.Entry) int64 {
	if len(e.Data) == 0 {
		return e.Size
	}
	var n int64
	for _, r := range e.Data {
		n += r[1]
	}
	return n
}

func (n *node) entry() *filecas.Entry {
	if i := n.t.Nodes[n.n].Entry; i >= 0 {
		return &n.t.Index.Entries[i]
	}
	return nil
}

func (n *node) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if n.n == 0 && n.attrs.Mode == 0 {
		n.attrs = attrsOf(n.t, 0)
	}
	out.Attr = n.attrs
	return fs.OK
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if e := n.entry(); e != nil && e.Type == "symlink" {
		return []byte(e.Target), fs.OK
	}
	return nil, syscall.EINVAL
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0 {
		return nil, 0, syscall.EROFS
	}
	// KEEP_CACHE: the content never changes, so pages read once stay valid across opens.
	return nil, fuse.FOPEN_KEEP_CACHE, fs.OK
}

func (n *node) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	e := n.entry()
	if e == nil || e.Type != "file" {
		return nil, syscall.EISDIR
	}
	n.once.Do(func() { n.segs = Segments(n.t.Index, e) }) // a file's once: a directory's is its names
	k, err := n.ct.ReadFile(ctx, n.segs, e.Size, dest, off)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, syscall.EINTR
		}
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:k]), fs.OK
}

// Options for Mount.
type Options struct {
	AllowOther bool
	Debug      bool
}

// Mount serves the tree at mountpoint and returns once the kernel has the mount. Entries, attributes and lookups that
// find nothing are cached by the kernel for a day: the tree never changes. nosuid and nodev: the index comes from a
// sandbox; default_permissions: the kernel checks the entries' modes and owners, as on the tree they were taken from.
func Mount(mountpoint string, t *Tree, ct *Content, o Options) (*fuse.Server, error) {
	long := 24 * time.Hour
	root := &node{t: t, ct: ct}
	root.attrs = attrsOf(t, 0)
	return fs.Mount(mountpoint, root, &fs.Options{
		EntryTimeout:    &long,
		AttrTimeout:     &long,
		NegativeTimeout: &long,
		MountOptions: fuse.MountOptions{
			FsName:       "snapflow-files",
			Name:         "snapflow-files",
			AllowOther:   o.AllowOther,
			DirectMount:  true,
			MaxReadAhead: 1 << 20,
			MaxWrite:     1 << 20, // also the largest read the kernel sends (max_pages)
			Options:      []string{"nosuid", "nodev", "default_permissions"},
			Debug:        o.Debug,
			// Passthrough (which the tree never uses: every read is served from the chunk cache) would make the
			// kernel count this mount as a stacked filesystem: an overlay stack of a chain's layers over it, under
			// the writable overlay at the target, then passes the kernel's stacking limit of 2 ("maximum fs
			// stacking depth exceeded") and a wake two deltas deep could not mount.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		},
	})
}

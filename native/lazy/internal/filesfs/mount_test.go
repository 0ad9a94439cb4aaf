package filesfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/testkit"
)

// mountServed mounts s's tree at a new directory (root with /dev/fuse only) and unmounts it at cleanup.
func mountServed(t *testing.T, s *served) string {
	t.Helper()
	testkit.NeedRootFUSE(t)
	tree, err := Build(s.x)
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	server, err := Mount(mnt, tree, s.ct, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return mnt
}

// seen is what a walk sees of one entry.
type seen struct {
	mode       fs.FileMode
	size       int64
	mtimeNs    int64
	uid, gid   uint32
	target     string
	content    []byte
	ino, nlink uint64
}

func walk(t *testing.T, root string) map[string]seen {
	t.Helper()
	out := map[string]seen{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		info, _ := d.Info()
		e := seen{mode: info.Mode(), size: st.Size, mtimeNs: st.Mtim.Nano(), uid: st.Uid, gid: st.Gid, ino: st.Ino, nlink: uint64(st.Nlink)}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			e.target, _ = os.Readlink(p)
		case info.Mode().IsRegular():
			if e.content, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		if info.IsDir() {
			e.size, e.nlink = 0, 0 // a directory's size and link count are the filesystem's own
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTheMountedTreeEqualsTheSource(t *testing.T) {
	s := serve(t, 16<<10)
	mnt := mountServed(t, s)
	want, got := walk(t, s.src), walk(t, mnt)
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(got) != len(want) {
		t.Errorf("%d entries mounted, %d in the source", len(got), len(want))
	}
	for _, n := range names {
		w, g := want[n], got[n]
		if g.mode != w.mode || g.size != w.size || g.mtimeNs != w.mtimeNs || g.uid != w.uid || g.gid != w.gid || g.target != w.target || g.nlink != w.nlink || !bytes.Equal(g.content, w.content) {
			t.Errorf("%s: mounted %v size %d mtime %d owner %d:%d → %q nlink %d (%d bytes); source %v size %d mtime %d owner %d:%d → %q nlink %d (%d bytes)",
				n, g.mode, g.size, g.mtimeNs, g.uid, g.gid, g.target, g.nlink, len(g.content), w.mode, w.size, w.mtimeNs, w.uid, w.gid, w.target, w.nlink, len(w.content))
		}
	}
	if got["a/pipe"].mode&fs.ModeNamedPipe == 0 {
		t.Errorf("the fifo is mounted as %v", got["a/pipe"].mode)
	}
	if a, b := got["a/b/mid.js"], got["pkg/hard.js"]; a.ino != b.ino || a.nlink != 2 {
		t.Errorf("hard links: inodes %d and %d, nlink %d; want one inode with two names", a.ino, b.ino, a.nlink)
	}
	if err := os.WriteFile(filepath.Join(mnt, "a/new"), nil, 0o644); err == nil {
		t.Error("a file was created in the read-only tree")
	}
}

func TestABadChunkReadsEIOThroughTheMount(t *testing.T) {
	s := serve(t, 16<<10)
	e := s.entry(t, "pkg/lib/two.js")
	ch := s.x.Chunks[e.Chunks[len(e.Chunks)-1]]
	s.store.Corrupt(packName, ch.Offset, ch.Offset+ch.Stored)
	mnt := mountServed(t, s)
	b, err := os.ReadFile(filepath.Join(mnt, "pkg/lib/two.js"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read over a bad chunk: %d bytes, %v; want EIO", len(b), err)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "a/b/mid.js")); err != nil {
		t.Fatalf("a file of good chunks: %v", err)
	}
}

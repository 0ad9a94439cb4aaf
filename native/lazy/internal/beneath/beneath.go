// Package beneath changes a directory tree without ever following a symlink in it: every operation is made
// relative to a directory file descriptor, and every descriptor is opened either from its parent with
// O_NOFOLLOW|O_DIRECTORY (one name, no '/') or with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS). Code running in
// the same tree may swap a directory for a symlink at any moment: a walk by path names would check the directory
// (lstat) and then act through the symlink; a walk by descriptors holds the directory it checked, so the swap can
// only make an open fail (ELOOP, ENOTDIR), never redirect it.
//
// A directory that is renamed elsewhere while held stays held: later changes land where that code moved it,
// which it could write itself. Nothing here ever resolves a name the tree's code chose into a place it cannot.
package beneath

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenRoot opens the directory the work is below; its last component must not be a symlink.
func OpenRoot(path string) (int, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// openDirAt opens the directory `name` (one component) of `dir`, refusing a symlink (ELOOP) or a non-directory (ENOTDIR).
func openDirAt(dir int, name string) (int, error) {
	return unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// noOpenat2 is set once the kernel (or a seccomp filter) has answered ENOSYS: then the component walk stands in.
var noOpenat2 bool

// OpenDirBeneath opens the directory at `rel` ('/'-separated, no '..') below `root` without following any symlink on
// the way: openat2 does it in one call; kernels before 5.6 get the same from one O_NOFOLLOW open per component.
func OpenDirBeneath(root int, rel string) (int, error) {
	if rel == "" {
		return unix.Dup(root)
	}
	if !noOpenat2 {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2 = true
	}
	fd, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := openDirAt(fd, part)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// OpenFileBeneath opens the file at `rel` ('/'-separated, no '..') below `root` with flags (O_NOFOLLOW and
// O_CLOEXEC added), following no symlink on the way or at its end: with O_CREAT|O_EXCL it makes the file (mode), and
// nothing that exists is ever opened. openat2 does it in one call; without it the parent is opened as OpenDirBeneath
// opens it, then the file with openat.
func OpenFileBeneath(root int, rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if flags&unix.O_CREAT == 0 {
		mode = 0 // openat2 refuses a mode it would not use (EINVAL)
	}
	if !noOpenat2 {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   uint64(flags),
			Mode:    uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2 = true
	}
	dir, name := splitRel(rel)
	parent, err := OpenDirBeneath(root, dir)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	return unix.Openat(parent, name, flags, mode)
}

// Names lists a directory by its descriptor (without "." and "..").
func Names(dir int) ([]string, error) {
	var names []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getdents(dir, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// RemoveAllAt removes `name` in `dir` and, when it is a directory, everything below it, by descriptors only: a
// symlink is removed itself, never followed. Absent is not an error. Something that reappears while it is removed
// (the tree's code writing into it) is removed again, a bounded number of times.
func RemoveAllAt(dir int, name string) error {
	var err error
	for range 8 {
		if err = unix.Unlinkat(dir, name, 0); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
			return err
		}
		sub, err := openDirAt(dir, name)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			continue // swapped for a symlink or a file since: unlink that
		}
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return err
		}
		err = removeContents(sub)
		unix.Close(sub)
		if err != nil {
			return err
		}
		if err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOTDIR) {
			return err
		}
	}
	return err
}

func removeContents(dir int) error {
	names, err := Names(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := RemoveAllAt(dir, n); err != nil {
			return err
		}
	}
	return nil
}

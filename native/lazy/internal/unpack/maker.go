package unpack

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
)

// Maker makes entries beneath a root through directory descriptors, never following a symlink: parents opened with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) (a directory not made yet is made on the way, as tar does), files
// O_CREAT|O_EXCL|O_NOFOLLOW, mkdirat, symlinkat, mkfifoat, linkat only to a file it made. Owners only with
// KeepOwners (and as root), set-id bits of files cleared without it; directories' modes and times are set by Finish,
// deepest first, once everything inside them is made. Both restores use it: the tar extractor (extract.go) and the
// file-level one (internal/filecas). It is not safe for concurrent use.
type Maker struct {
	root       int
	keepOwners bool
	// source names what the entries come from in errors: "archive" (the default) or "index"
	source string
	asRoot bool
	// the directory the last entry was made in, held for the entries after it (a tree lists a directory's
	// entries together)
	dirRel string
	dirFd  int
	// regular files made, by name: what a hard link may name, with the size the link reports
	files map[string]int64
	dirs  []dirMeta
}

// dirMeta is a directory's mode, owner and times, set once everything inside it is made.
type dirMeta struct {
	name     string
	mode     uint32
	uid, gid int
	mtime    unix.Timespec
}

// NewMaker makes entries beneath the descriptor root, which it owns from now on (Close closes it).
func NewMaker(root int, keepOwners bool) *Maker {
	return &Maker{root: root, keepOwners: keepOwners, source: "archive", asRoot: os.Geteuid() == 0, dirFd: -1, files: map[string]int64{}}
}

// NamedFor sets what the entries come from, as errors name it (and their field): "archive" or "index".
func (m *Maker) NamedFor(source string) *Maker {
	m.source = source
	return m
}

// Root is the root's descriptor (the Maker's: not to be closed).
func (m *Maker) Root() int { return m.root }

// Close releases the held directory and the root.
func (m *Maker) Close() {
	if m.dirFd >= 0 {
		unix.Close(m.dirFd)
		m.dirFd = -1
	}
	unix.Close(m.root)
}

// FileSize answers a regular file's size if this Maker made it (MadeFile).
func (m *Maker) FileSize(name string) (int64, bool) {
	size, ok := m.files[name]
	return size, ok
}

// MadeFile records a regular file made under name: a later hard link may name it.
func (m *Maker) MadeFile(name string, size int64) { m.files[name] = size }

// Dir makes directory name (or takes the one made on the way to an entry below it) and notes its metadata for Finish.
func (m *Maker) Dir(name string, mode uint32, uid, gid int, mtime unix.Timespec) error {
	parentRel, base := splitName(name)
	parent, err := m.Parent(parentRel, name)
	if err != nil {
		return err
	}
	if err := unix.Mkdirat(parent, base, 0o700); err != nil {
		// Made already on the way to an entry below it (a tree that lists a directory after its contents).
		var st unix.Stat_t
		if !errors.Is(err, unix.EEXIST) || unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return madeError(name, err)
		}
	}
	m.dirs = append(m.dirs, dirMeta{name: name, mode: mode, uid: uid, gid: gid, mtime: mtime})
	return nil
}

// Symlink makes a symlink with its owner (when kept) and mtime.
func (m *Maker) Symlink(name, target string, uid, gid int, mtime unix.Timespec) error {
	parent, base, err := m.parentOf(name)
	if err != nil {
		return err
	}
	if err := unix.Symlinkat(target, parent, base); err != nil {
		return madeError(name, err)
	}
	return m.ownerAndTimes(parent, base, name, uid, gid, mtime)
}

// Fifo makes a FIFO with its mode, owner (when kept) and mtime.
func (m *Maker) Fifo(name string, mode uint32, uid, gid int, mtime unix.Timespec) error {
	parent, base, err := m.parentOf(name)
	if err != nil {
		return err
	}
	if err := unix.Mkfifoat(parent, base, mode&0o1777); err != nil {
		return madeError(name, err)
	}
	return m.ownerAndTimes(parent, base, name, uid, gid, mtime)
}

// Whiteout makes an overlay whiteout (char 0/0, a deletion in an overlay delta), the one device node ever made.
func (m *Maker) Whiteout(name string, mode uint32) error {
	parent, base, err := m.parentOf(name)
	if err != nil {
		return err
	}
	if err := unix.Mknodat(parent, base, unix.S_IFCHR|mode&0o777, 0); err != nil {
		return madeError(name, err)
	}
	return nil
}

// Link makes name a hard link to first, which must be a regular file this Maker made.
func (m *Maker) Link(name, first string) error {
	parentRel, base := splitName(name)
	parent, err := m.Parent(parentRel, name)
	if err != nil {
		return err
	}
	from, fromBase := splitName(first)
	if _, ok := m.files[first]; !ok {
		return &Error{Code: "tool_failed", Message: fmt.Sprintf("the %s's hard link %q names %q, which it has not made as a file before it", m.source, name, first)}
	}
	fromFd := parent
	if from != parentRel {
		if fromFd, err = beneath.OpenDirBeneath(m.root, from); err != nil {
			return madeError(name, err)
		}
		defer unix.Close(fromFd)
	}
	// No AT_SYMLINK_FOLLOW: the name is linked as it is, and it is a file this Maker made.
	if err := unix.Linkat(fromFd, fromBase, parent, base, 0); err != nil {
		return madeError(name, err)
	}
	return nil
}

// CreateFile opens a new regular file O_CREAT|O_EXCL|O_NOFOLLOW (nothing that exists is ever opened, so no link
// planted before can carry a write out), mode 0600 until SetFile; the caller closes it.
func (m *Maker) CreateFile(name string) (int, error) {
	parent, base, err := m.parentOf(name)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat(parent, base, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, madeError(name, err)
	}
	return fd, nil
}

// SetFile gives an open regular file its owner (when kept), mode (set-id bits cleared unless owners are kept) and
// mtime. Safe for concurrent use (it touches only the descriptor).
func (m *Maker) SetFile(fd int, name string, mode uint32, uid, gid int, mtime unix.Timespec) error {
	if m.keepOwners && m.asRoot {
		// Before the mode: chown clears set-id bits.
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return madeError(name, err)
		}
	} else if !m.keepOwners {
		mode &^= 0o6000
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return madeError(name, err)
	}
	if err := futimens(fd, mtime); err != nil {
		return madeError(name, err)
	}
	return nil
}

func (m *Maker) parentOf(name string) (int, string, error) {
	parentRel, base := splitName(name)
	parent, err := m.Parent(parentRel, name)
	return parent, base, err
}

// ownerAndTimes gives a symlink or FIFO its owner (when kept, as root) and mtime, without following it.
func (m *Maker) ownerAndTimes(parent int, base, name string, uid, gid int, mtime unix.Timespec) error {
	if m.keepOwners && m.asRoot {
		if err := unix.Fchownat(parent, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return madeError(name, err)
		}
	}
	times := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, mtime}
	if err := unix.UtimesNanoAt(parent, base, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return madeError(name, err)
	}
	return nil
}

// Parent answers the directory `rel` beneath the root, held for the entries after it. A directory not made (yet) is
// made on the way, as tar does; a symlink or a non-directory on the way refuses the entry.
func (m *Maker) Parent(rel, name string) (int, error) {
	if m.dirFd >= 0 && rel == m.dirRel {
		return m.dirFd, nil
	}
	if m.dirFd >= 0 {
		unix.Close(m.dirFd)
		m.dirFd = -1
	}
	fd, err := beneath.OpenDirBeneath(m.root, rel)
	if errors.Is(err, unix.ENOENT) {
		fd, err = m.makeOnTheWay(rel)
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		return -1, &Error{Code: "path_outside_root", Field: m.source, Message: fmt.Sprintf("the %s's entry %q is refused: %q is not a directory made beneath the restored tree (a symlink or a file is there)", m.source, name, rel)}
	}
	if err != nil {
		return -1, madeError(name, err)
	}
	m.dirRel, m.dirFd = rel, fd
	return fd, nil
}

func (m *Maker) makeOnTheWay(rel string) (int, error) {
	fd, err := unix.Dup(m.root)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, part, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// Finish gives each directory made by Dir its owner, mode and times, deepest first: made after its last child, so
// nothing moves its mtime again.
func (m *Maker) Finish() error {
	for i := len(m.dirs) - 1; i >= 0; i-- {
		d := m.dirs[i]
		parentRel, base := splitName(d.name)
		parent, err := m.Parent(parentRel, d.name)
		if err != nil {
			return err
		}
		fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return madeError(d.name, err)
		}
		if m.keepOwners && m.asRoot {
			err = unix.Fchown(fd, d.uid, d.gid)
		}
		if err == nil {
			err = unix.Fchmod(fd, d.mode)
		}
		if err == nil {
			err = futimens(fd, d.mtime)
		}
		unix.Close(fd)
		if err != nil {
			return madeError(d.name, err)
		}
	}
	return nil
}

// MadeError is how a failure making an entry is answered: a full disk is no_space (the agent's code for it);
// anything else is tool_failed.
func MadeError(name string, err error) error { return madeError(name, err) }

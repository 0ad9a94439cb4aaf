package unpack

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
)

// holeBlock is the unit a sparse entry's zeros are skipped by: a filesystem block, so a skipped one is a hole.
const holeBlock = 4096

// extractor makes the archive's entries beneath root, each through a directory descriptor.
type extractor struct {
	root   int
	x      *Expected
	o      Options
	diffs  differences
	asRoot bool
	buf    []byte
	zeros  []byte
	h      hash.Hash
	// the directory the last entry was made in, held for the entries after it (an archive lists a directory's
	// entries together)
	dirRel string
	dirFd  int
	// regular files this archive made, by name: what a hard link may name, with the size the link reports
	files   map[string]int64
	dirs    []dirMeta
	entries int
}

// dirMeta is a directory's mode, owner and times, set once the archive has made everything inside it.
type dirMeta struct {
	name     string
	mode     uint32
	uid, gid int
	mtime    unix.Timespec
}

func newExtractor(root int, x *Expected, o Options) *extractor {
	return &extractor{
		root: root, x: x, o: o, diffs: differences{limit: o.Limit}, asRoot: os.Geteuid() == 0,
		buf: make([]byte, 1<<20), zeros: make([]byte, holeBlock), h: sha256.New(), dirFd: -1, files: map[string]int64{},
	}
}

func (e *extractor) close() {
	if e.dirFd >= 0 {
		unix.Close(e.dirFd)
		e.dirFd = -1
	}
	unix.Close(e.root)
}

func kindOf(flag byte) (string, bool) {
	switch flag {
	case tar.TypeReg, tar.TypeRegA, tar.TypeCont, tar.TypeGNUSparse:
		return "file", true
	case tar.TypeLink:
		return "link", true
	case tar.TypeSymlink:
		return "symlink", true
	case tar.TypeDir:
		return "dir", true
	case tar.TypeFifo, tar.TypeChar, tar.TypeBlock:
		return "other", true
	}
	return "", false
}

func (e *extractor) entry(hdr *tar.Header, tr *tar.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := entryName(hdr.Name, "entry")
	if err != nil {
		return err
	}
	e.entries++
	kind, ok := kindOf(hdr.Typeflag)
	if !ok {
		return &Error{Code: "tool_failed", Message: fmt.Sprintf("the archive's entry %q has tar type %q, which a restore does not make", hdr.Name, hdr.Typeflag)}
	}
	// "" is the archive's root ("./"): the staging directory itself, whose metadata no manifest holds.
	if name == "" {
		return nil
	}
	got := &Got{Type: kind, Mode: hdr.Mode & 0o7777, Mtime: hdr.ModTime.Unix()}
	switch kind {
	case "file":
		got.Size = hdr.Size
	case "link":
		target, err := entryName(hdr.Linkname, "hard link target")
		if err != nil {
			return err
		}
		if target == "" {
			return outside(hdr.Linkname, "hard link target", "the tree's root")
		}
		got.Type, got.Link, got.Size = "file", target, e.files[target]
	case "symlink":
		got.Target, got.Size = hdr.Linkname, int64(len(hdr.Linkname))
	case "other":
		got.Size = hdr.Size
	}
	w := e.x.lookup(name)
	if w == nil || w.seen {
		e.diffs.note(Difference{Path: name, Kind: "extra"})
		return nil
	}
	w.seen = true
	// Made only as the manifest has it: an entry of another type there is a difference, and nothing is made.
	if w.Type == got.Type && (w.Link == "") == (got.Link == "") {
		if err := e.make(name, kind, hdr, tr, got); err != nil {
			return err
		}
	}
	if fields := compare(w, got); len(fields) > 0 {
		e.diffs.note(Difference{Path: name, Kind: "changed", Fields: fields})
	}
	return nil
}

func (e *extractor) make(name, kind string, hdr *tar.Header, tr *tar.Reader, got *Got) error {
	parentRel, base := splitName(name)
	parent, err := e.parent(parentRel, name)
	if err != nil {
		return err
	}
	fail := func(err error) error { return madeError(name, err) }
	mtime := unix.NsecToTimespec(hdr.ModTime.UnixNano())
	times := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, mtime}
	switch {
	case kind == "file":
		sum, err := e.file(parent, base, name, hdr, tr)
		if err != nil {
			return err
		}
		got.Sha256 = sum
		e.files[name] = hdr.Size
	case kind == "link":
		from, fromBase := splitName(got.Link)
		if _, ok := e.files[got.Link]; !ok {
			return &Error{Code: "tool_failed", Message: fmt.Sprintf("the archive's hard link %q names %q, which it has not made as a file before it", name, got.Link)}
		}
		fromFd := parent
		if from != parentRel {
			if fromFd, err = beneath.OpenDirBeneath(e.root, from); err != nil {
				return fail(err)
			}
			defer unix.Close(fromFd)
		}
		// No AT_SYMLINK_FOLLOW: the name is linked as it is, and it is a file this archive made.
		if err := unix.Linkat(fromFd, fromBase, parent, base, 0); err != nil {
			return fail(err)
		}
	case kind == "dir":
		if err := unix.Mkdirat(parent, base, 0o700); err != nil {
			// Made already on the way to an entry below it (an archive that lists a directory after its contents).
			var st unix.Stat_t
			if !errors.Is(err, unix.EEXIST) || unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return fail(err)
			}
		}
		e.dirs = append(e.dirs, dirMeta{name: name, mode: uint32(got.Mode), uid: hdr.Uid, gid: hdr.Gid, mtime: mtime})
	case kind == "symlink":
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return fail(err)
		}
		if err := e.owners(parent, base, hdr); err != nil {
			return fail(err)
		}
		if err := unix.UtimesNanoAt(parent, base, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail(err)
		}
	case hdr.Typeflag == tar.TypeFifo:
		if err := unix.Mkfifoat(parent, base, uint32(got.Mode)&0o1777); err != nil {
			return fail(err)
		}
		if err := e.owners(parent, base, hdr); err != nil {
			return fail(err)
		}
		if err := unix.UtimesNanoAt(parent, base, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail(err)
		}
	case hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0:
		// An overlay whiteout (a deletion in an overlay delta), not a device: kept, as sanitize keeps it.
		if err := unix.Mknodat(parent, base, unix.S_IFCHR|uint32(got.Mode)&0o777, 0); err != nil {
			return fail(err)
		}
	default:
		// A device node: a door to the host's hardware, never made; the tree's walk then finds it missing.
	}
	return nil
}

// owners gives a symlink or FIFO the archive's owner when the restore keeps owners (and may: as root).
func (e *extractor) owners(parent int, base string, hdr *tar.Header) error {
	if !e.o.KeepOwners || !e.asRoot {
		return nil
	}
	return unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)
}

// file writes a regular file's bytes through a descriptor opened O_CREAT|O_EXCL|O_NOFOLLOW (nothing that exists is
// ever opened, so no link planted before can carry a write out), hashing them as they go; answers their SHA-256.
func (e *extractor) file(parent int, base, name string, hdr *tar.Header, tr *tar.Reader) (string, error) {
	fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", madeError(name, err)
	}
	defer unix.Close(fd)
	sparse := hdr.Typeflag == tar.TypeGNUSparse || hdr.PAXRecords["GNU.sparse.major"] != "" || hdr.PAXRecords["GNU.sparse.size"] != "" || hdr.PAXRecords["GNU.sparse.map"] != ""
	e.h.Reset()
	var off int64
	for {
		n, rerr := tr.Read(e.buf)
		if n > 0 {
			chunk := e.buf[:n]
			e.h.Write(chunk)
			if sparse {
				err = e.writeSparse(fd, chunk, off)
			} else {
				err = writeAll(fd, chunk)
			}
			if err != nil {
				return "", madeError(name, err)
			}
			off += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", streamError(rerr)
		}
	}
	if sparse {
		if err := unix.Ftruncate(fd, off); err != nil {
			return "", madeError(name, err)
		}
	}
	mode := uint32(hdr.Mode & 0o7777)
	if e.o.KeepOwners && e.asRoot {
		// Before the mode: chown clears set-id bits.
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return "", madeError(name, err)
		}
	} else if !e.o.KeepOwners {
		mode &^= 0o6000
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return "", madeError(name, err)
	}
	if err := futimens(fd, unix.NsecToTimespec(hdr.ModTime.UnixNano())); err != nil {
		return "", madeError(name, err)
	}
	return hex.EncodeToString(e.h.Sum(nil)), nil
}

// writeSparse writes a sparse entry's bytes at off, leaving each whole block of zeros unwritten: a hole.
func (e *extractor) writeSparse(fd int, chunk []byte, off int64) error {
	for len(chunk) > 0 {
		n := holeBlock - int(off%holeBlock)
		if n > len(chunk) {
			n = len(chunk)
		}
		piece := chunk[:n]
		if n < holeBlock || !bytes.Equal(piece, e.zeros) {
			if _, err := unix.Pwrite(fd, piece, off); err != nil {
				return err
			}
		}
		chunk, off = chunk[n:], off+int64(n)
	}
	return nil
}

func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// futimens sets an open file's mtime (nanoseconds) and leaves its atime: utimensat(fd, NULL, …).
func futimens(fd int, mtime unix.Timespec) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, mtime}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafePointer(&ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// parent answers the directory `rel` beneath the root, held for the entries after it. A directory the archive
// has not listed (yet) is made on the way, as tar does; a symlink or a non-directory on the way refuses the entry.
func (e *extractor) parent(rel, name string) (int, error) {
	if e.dirFd >= 0 && rel == e.dirRel {
		return e.dirFd, nil
	}
	if e.dirFd >= 0 {
		unix.Close(e.dirFd)
		e.dirFd = -1
	}
	fd, err := beneath.OpenDirBeneath(e.root, rel)
	if errors.Is(err, unix.ENOENT) {
		fd, err = e.makeOnTheWay(rel)
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		return -1, &Error{Code: "path_outside_root", Field: "archive", Message: fmt.Sprintf("the archive's entry %q is refused: %q is not a directory made beneath the restored tree (a symlink or a file is there)", name, rel)}
	}
	if err != nil {
		return -1, madeError(name, err)
	}
	e.dirRel, e.dirFd = rel, fd
	return fd, nil
}

func (e *extractor) makeOnTheWay(rel string) (int, error) {
	fd, err := unix.Dup(e.root)
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

// finish gives each directory the archive listed its owner, mode and times, deepest first: made after its last
// child, so nothing moves its mtime again.
func (e *extractor) finish() error {
	for i := len(e.dirs) - 1; i >= 0; i-- {
		d := e.dirs[i]
		parentRel, base := splitName(d.name)
		parent, err := e.parent(parentRel, d.name)
		if err != nil {
			return err
		}
		fd, err := unix.Openat(parent, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return madeError(d.name, err)
		}
		if e.o.KeepOwners && e.asRoot {
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

// madeError: a full disk is no_space (the agent's code for it); anything else making an entry is tool_failed.
func madeError(name string, err error) error {
	var known *Error
	if errors.As(err, &known) {
		return known
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return &Error{Code: "no_space", Message: fmt.Sprintf("restoring %s: No space left on device", name)}
	}
	return &Error{Code: "tool_failed", Message: fmt.Sprintf("restoring %s: %v", name, err)}
}

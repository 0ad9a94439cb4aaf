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

	"golang.org/x/sys/unix"
)

// holeBlock is the unit a sparse entry's zeros are skipped by: a filesystem block, so a skipped one is a hole.
const holeBlock = 4096

// extractor makes the archive's entries beneath root, each through a directory descriptor (Maker).
type extractor struct {
	*Maker
	x       *Expected
	o       Options
	diffs   Differences
	buf     []byte
	zeros   []byte
	h       hash.Hash
	entries int
}

func newExtractor(root int, x *Expected, o Options) *extractor {
	return &extractor{
		Maker: NewMaker(root, o.KeepOwners), x: x, o: o, diffs: Differences{limit: o.Limit},
		buf: make([]byte, 1<<20), zeros: make([]byte, holeBlock), h: sha256.New(),
	}
}

func (e *extractor) close() { e.Close() }

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
		size, _ := e.FileSize(target)
		got.Type, got.Link, got.Size = "file", target, size
	case "symlink":
		got.Target, got.Size = hdr.Linkname, int64(len(hdr.Linkname))
	case "other":
		got.Size = hdr.Size
	}
	if e.o.Unchecked {
		return e.make(name, kind, hdr, tr, got)
	}
	w := e.x.lookup(name)
	if w == nil || w.seen {
		e.diffs.Note(Difference{Path: name, Kind: "extra"})
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
		e.diffs.Note(Difference{Path: name, Kind: "changed", Fields: fields})
	}
	return nil
}

func (e *extractor) make(name, kind string, hdr *tar.Header, tr *tar.Reader, got *Got) error {
	mtime := unix.NsecToTimespec(hdr.ModTime.UnixNano())
	switch {
	case kind == "file":
		sum, err := e.file(name, hdr, tr)
		if err != nil {
			return err
		}
		got.Sha256 = sum
		e.MadeFile(name, hdr.Size)
	case kind == "link":
		return e.Link(name, got.Link)
	case kind == "dir":
		return e.Dir(name, uint32(got.Mode), hdr.Uid, hdr.Gid, mtime)
	case kind == "symlink":
		return e.Symlink(name, hdr.Linkname, hdr.Uid, hdr.Gid, mtime)
	case hdr.Typeflag == tar.TypeFifo:
		return e.Fifo(name, uint32(got.Mode), hdr.Uid, hdr.Gid, mtime)
	case hdr.Typeflag == tar.TypeChar && hdr.Devmajor == 0 && hdr.Devminor == 0:
		// An overlay whiteout (a deletion in an overlay delta), not a device: kept, as sanitize keeps it.
		return e.Whiteout(name, uint32(got.Mode))
	default:
		// A device node: a door to the host's hardware, never made; the tree's walk then finds it missing. Its
		// parent is made all the same, as for every entry.
		_, _, err := e.parentOf(name)
		return err
	}
	return nil
}

// file writes a regular file's bytes through a descriptor the Maker created (O_EXCL|O_NOFOLLOW), hashing them as
// they go; answers their SHA-256.
func (e *extractor) file(name string, hdr *tar.Header, tr *tar.Reader) (string, error) {
	fd, err := e.CreateFile(name)
	if err != nil {
		return "", err
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
				err = WriteSparse(fd, chunk, off, e.zeros)
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
	if err := e.SetFile(fd, name, uint32(hdr.Mode&0o7777), hdr.Uid, hdr.Gid, unix.NsecToTimespec(hdr.ModTime.UnixNano())); err != nil {
		return "", err
	}
	return hex.EncodeToString(e.h.Sum(nil)), nil
}

// WriteSparse writes bytes at off, leaving each whole block of zeros unwritten: a hole. zeros is a holeBlock of
// zeros (the caller's, so concurrent writers share none).
func WriteSparse(fd int, chunk []byte, off int64, zeros []byte) error {
	for len(chunk) > 0 {
		n := holeBlock - int(off%holeBlock)
		if n > len(chunk) {
			n = len(chunk)
		}
		piece := chunk[:n]
		if n < holeBlock || !bytes.Equal(piece, zeros) {
			if _, err := unix.Pwrite(fd, piece, off); err != nil {
				return err
			}
		}
		chunk, off = chunk[n:], off+int64(n)
	}
	return nil
}

// HoleBlock is the unit WriteSparse leaves holes by.
const HoleBlock = holeBlock

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

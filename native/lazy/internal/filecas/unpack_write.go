package filecas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/unpack"
)

// fileState is one regular file with content as its chunks arrive, in any order, from any fetcher. Its hash runs in
// chunk order: a chunk that arrives in turn is hashed from memory as it is written; one that arrives early is
// written and hashed later by reading it back from the file, once the chunks before it are in. A dense file of one
// chunk is its chunk: its SHA-256 is the chunk's, checked before it was written, so it is not hashed again.
type fileState struct {
	mu      sync.Mutex
	e       *Entry
	regions [][2]int64 // its data regions; [[0, size]] when dense
	sizes   []int64    // each chunk position's size
	sparse  bool
	// one: a dense file of one chunk, whose SHA-256 is that chunk's
	one     bool
	fd      int
	created bool
	ino     [2]uint64
	next    int    // the next position to hash
	written []bool // positions written ahead of next
	h       hash.Hash
	hashed  int64 // file offset the hash has reached
	done    bool
}

func newFileState(e *Entry, x *Index) *fileState {
	f := &fileState{e: e, fd: -1, regions: e.Data, sparse: len(e.Data) > 0 || e.Holes > 0}
	if len(e.Data) == 0 {
		f.regions = [][2]int64{{0, e.Size}}
	}
	f.sizes = make([]int64, len(e.Chunks))
	for i, c := range e.Chunks {
		f.sizes[i] = x.Chunks[c].Size
	}
	f.one = len(e.Chunks) == 1 && len(e.Data) == 0
	if !f.one {
		f.h = sha256.New()
		f.written = make([]bool, len(e.Chunks))
	}
	return f
}

// writer is one fetcher's side of the writes: its scratch buffers, and the restore's shared state.
type writer struct {
	r       *restore
	scratch []byte
	zeros   []byte
	pieces  []piece
	// the files this fetcher opened in its current request, closed at its end unless finished
	touched []*fileState
}

// put writes a verified chunk (sum: its SHA-256) at one of its uses, advances that file's hash and finishes the
// file when its last chunk is in.
func (w *writer) put(u use, data []byte, sum string) error {
	f := u.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := w.open(f); err != nil {
		return err
	}
	w.pieces = pieces(f.regions, u.dataOff, len(data), w.pieces)
	for _, p := range w.pieces {
		var err error
		if f.sparse {
			err = unpack.WriteSparse(f.fd, data[p.from:p.to], p.at, w.zeros)
		} else {
			err = pwriteAll(f.fd, data[p.from:p.to], p.at)
		}
		if err != nil {
			return unpack.MadeError(f.e.Path, err)
		}
	}
	w.r.bytes.Add(int64(len(data)))
	if f.one {
		f.next = 1
		return w.finish(f, sum)
	}
	if u.pos != f.next {
		f.written[u.pos] = true
		return nil
	}
	w.hashPieces(f, data)
	f.next++
	for f.next < len(f.sizes) && f.written[f.next] {
		if err := w.reread(f, f.next); err != nil {
			return err
		}
		f.next++
	}
	if f.next == len(f.sizes) {
		f.hashZerosTo(f.e.Size)
		return w.finish(f, hex.EncodeToString(f.h.Sum(nil)))
	}
	return nil
}

// open gives f a descriptor: the file made O_CREAT|O_EXCL|O_NOFOLLOW beneath the root on its first chunk (its
// parent was made by the tree's pass), or opened again (never through a symlink) and checked to be that same inode.
func (w *writer) open(f *fileState) error {
	if f.fd >= 0 {
		return nil
	}
	flags := unix.O_RDWR
	if !f.created {
		flags |= unix.O_CREAT | unix.O_EXCL
	}
	fd, err := beneath.OpenFileBeneath(w.r.maker.Root(), f.e.Path, flags, 0o600)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) {
		return &Error{Code: "path_outside_root", Field: "index", Message: fmt.Sprintf("the index's entry %q is refused: a symlink or a file is on its way beneath the restored tree", f.e.Path)}
	}
	if err != nil {
		return unpack.MadeError(f.e.Path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return unpack.MadeError(f.e.Path, err)
	}
	if !f.created {
		f.created, f.ino = true, [2]uint64{st.Dev, st.Ino}
		// A sparse file has its size from the start: a hole (or a zero block left unwritten) reads back as zeros.
		if f.sparse {
			if err := unix.Ftruncate(fd, f.e.Size); err != nil {
				unix.Close(fd)
				return unpack.MadeError(f.e.Path, err)
			}
		}
	} else if st.Mode&unix.S_IFMT != unix.S_IFREG || f.ino != [2]uint64{st.Dev, st.Ino} {
		unix.Close(fd)
		return &Error{Code: "tool_failed", Message: fmt.Sprintf("restoring %s: the file made for it was replaced", f.e.Path)}
	}
	f.fd = fd
	w.touched = append(w.touched, f)
	return nil
}

// hashPieces hashes a chunk's bytes in file order, the holes before each piece as zeros.
func (w *writer) hashPieces(f *fileState, data []byte) {
	for _, p := range w.pieces {
		f.hashZerosTo(p.at)
		f.h.Write(data[p.from:p.to])
		f.hashed = p.at + int64(p.to-p.from)
	}
}

// reread hashes position pos, written ahead of its turn, by reading it back from the file.
func (w *writer) reread(f *fileState, pos int) error {
	var dataOff int64
	for _, s := range f.sizes[:pos] {
		dataOff += s
	}
	for _, p := range pieces(f.regions, dataOff, int(f.sizes[pos]), nil) {
		f.hashZerosTo(p.at)
		for at, end := p.at, p.at+int64(p.to-p.from); at < end; {
			buf := w.scratch[:min(int64(len(w.scratch)), end-at)]
			n, err := unix.Pread(f.fd, buf, at)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil && n == 0 {
				err = fmt.Errorf("the file is shorter than was written")
			}
			if err != nil {
				return unpack.MadeError(f.e.Path, err)
			}
			f.h.Write(buf[:n])
			at += int64(n)
			w.r.reread.Add(int64(n))
		}
		f.hashed = p.at + int64(p.to-p.from)
	}
	return nil
}

func (f *fileState) hashZerosTo(at int64) {
	for n := at - f.hashed; n > 0; {
		take := min(n, int64(len(zeroBlock)))
		f.h.Write(zeroBlock[:take])
		n -= take
	}
	f.hashed = max(f.hashed, at)
}

var zeroBlock = make([]byte, 64<<10)

// finish compares the file's SHA-256 with its entry (a difference, not an error: the caller fails the restore
// naming it), gives a sparse file its size (its holes stay holes), its mode, owner and mtime, and closes it.
func (w *writer) finish(f *fileState, sum string) error {
	if sum != f.e.Sha256 {
		w.r.note(unpack.Difference{Path: f.e.Path, Kind: "changed", Fields: []unpack.Field{{Name: "sha256", Expected: optional(f.e.Sha256), Actual: sum}}})
	}
	if f.sparse {
		if err := unix.Ftruncate(f.fd, f.e.Size); err != nil {
			return unpack.MadeError(f.e.Path, err)
		}
	}
	if err := w.r.maker.SetFile(f.fd, f.e.Path, f.e.Mode&0o7777, int(f.e.UID), int(f.e.GID), mtimeOf(f.e)); err != nil {
		return err
	}
	f.done = true
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return unpack.MadeError(f.e.Path, err)
	}
	w.r.files.Add(1)
	return nil
}

// release closes what this fetcher opened and left unfinished (a later chunk, from another request, reopens it):
// descriptors stay few however the chunks are spread.
func (w *writer) release() {
	for _, f := range w.touched {
		f.mu.Lock()
		if f.fd >= 0 && !f.done {
			unix.Close(f.fd)
			f.fd = -1
		}
		f.mu.Unlock()
	}
	w.touched = w.touched[:0]
}

func pwriteAll(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(fd, p, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

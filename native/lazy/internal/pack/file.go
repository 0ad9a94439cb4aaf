package pack

import (
	"archive/tar"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"

	"golang.org/x/sys/unix"
)

// file packs a regular file: a hard link to a name already archived, or its content read once.
func (p *packer) file(dirfd int, name, rel string, e *Entry, h *tar.Header, st *unix.Stat_t) error {
	e.Type, e.Size = "file", st.Size
	if st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := p.firstName[key]; ok {
			e.Link, e.Size = first.path, first.size
			h.Typeflag, h.Linkname = tar.TypeLink, "./"+first.path
			return p.emit(e, h)
		}
		p.firstName[key] = linked{rel, st.Size}
	}
	testHook("open", rel)
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return changed(rel, "File removed before we read it")
	}
	if errors.Is(err, unix.ELOOP) {
		return changed(rel, "file changed as we read it")
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if now.Dev != st.Dev || now.Ino != st.Ino || now.Mode&unix.S_IFMT != unix.S_IFREG {
		return changed(rel, "file changed as we read it")
	}
	p.hash.Reset()
	var regions []region
	sparse := false
	if looksSparse(st) && st.Size > 0 {
		regions, sparse, err = dataRegions(fd, st.Size)
		if err != nil {
			return fmt.Errorf("map the holes of %s: %w", rel, err)
		}
	}
	if sparse {
		err = p.sparseBody(fd, rel, e, st, regions)
	} else {
		h.Typeflag, h.Size = tar.TypeReg, st.Size
		if err = p.tar.header(h); err == nil {
			err = p.copy(fd, rel, 0, st.Size)
		}
	}
	if err != nil {
		return err
	}
	testHook("read", rel)
	// What was read is what the walk saw only if nothing moved meanwhile (tar's own test, by ctime, plus size/mtime).
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if now.Size != st.Size || now.Mtim != st.Mtim || now.Ctim != st.Ctim {
		return changed(rel, "file changed as we read it")
	}
	e.Sha256 = hex.EncodeToString(p.hash.Sum(nil))
	return p.sink.add(e)
}

// sparseBody writes a sparse file as GNU PAX 1.0: header, map, then the regions' bytes; the hash is of the file as
// it reads back (zeros in every hole), and the entry records the bytes no region covers.
func (p *packer) sparseBody(fd int, rel string, e *Entry, st *unix.Stat_t, regions []region) error {
	mapBytes := sparseMap(regions)
	var data int64
	for _, r := range regions {
		data += r.length
	}
	body := int64(len(mapBytes)) + data
	if err := p.tar.sparseHeader("./"+rel, int64(e.Mode), int(st.Uid), int(st.Gid), mtimeOf(st), st.Size, body); err != nil {
		return err
	}
	if err := p.tar.rawWrite(mapBytes); err != nil {
		return err
	}
	var pos int64
	for _, r := range regions {
		hashZeros(p.hash, r.offset-pos)
		if err := p.copyRaw(fd, rel, r.offset, r.length); err != nil {
			return err
		}
		pos = r.offset + r.length
	}
	hashZeros(p.hash, st.Size-pos)
	if holes := st.Size - data; holes > 0 {
		e.Holes = holes
	}
	return p.tar.padTo(body)
}

// copy reads [off, off+n) of the file into the hash and the current tar entry (archive/tar's).
func (p *packer) copy(fd int, rel string, off, n int64) error {
	return p.read(fd, rel, off, n, func(b []byte) error { _, err := p.tar.Write(b); return err })
}

// copyRaw is copy for a sparse entry, which is written around archive/tar.
func (p *packer) copyRaw(fd int, rel string, off, n int64) error {
	return p.read(fd, rel, off, n, p.tar.rawWrite)
}

func (p *packer) read(fd int, rel string, off, n int64, write func([]byte) error) error {
	for n > 0 {
		chunk := p.buf[:min(int64(len(p.buf)), n)]
		got, err := unix.Pread(fd, chunk, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
		if got == 0 {
			return changed(rel, fmt.Sprintf("File shrank by %d bytes", n))
		}
		p.hash.Write(chunk[:got])
		if err := write(chunk[:got]); err != nil {
			return err
		}
		off += int64(got)
		n -= int64(got)
	}
	return nil
}

// testHook lets the package's tests change the tree at a stage of a file's packing ("open": before it is opened,
// "read": after its content was read); it does nothing otherwise.
var testHook = func(stage, rel string) {}

var zeros = make([]byte, 1<<20)

func hashZeros(h hash.Hash, n int64) {
	for n > 0 {
		take := min(n, int64(len(zeros)))
		h.Write(zeros[:take])
		n -= take
	}
}

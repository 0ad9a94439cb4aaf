package filecas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	fastcdc "github.com/jotfs/fastcdc-go"
	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/pack"
)

// reader reads the files a pass cannot take from its base: each once, beneath the root's descriptor, checked against
// the walk's lstat before and after (pack's checks: a file that changed while read fails the pass naming it).
type reader struct {
	root int
	// dir: the directory of the last file read (dirRel below the root), kept open for its siblings
	dir    int
	dirRel string
	avg    int
	table  *chunkTable
	frames *framer
	whole  hash.Hash
	read   Counts
	// layered: the names the layers over the base touched (lower.go), when the tree is an overlay over it
	layered map[string]struct{}
}

// testOpened lets the package's tests see which files a pass opens; it does nothing otherwise.
var testOpened = func(rel string) {}

func (r *reader) close() {
	if r.dir >= 0 {
		unix.Close(r.dir)
		r.dir = -1
	}
}

func nodeOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "char"
	}
	return "block"
}

// file reads the walked regular file into e: sha256, holes and data regions, chunks.
func (r *reader) file(w *pack.Walked, e *Entry) error {
	rel, st := e.Path, w.Lstat()
	parent, name := splitPath(rel)
	if r.dir < 0 || parent != r.dirRel {
		r.close()
		dir, err := beneath.OpenDirBeneath(r.root, parent)
		if err != nil {
			return pack.Changed(rel, "Cannot stat: No such file or directory")
		}
		r.dir, r.dirRel = dir, parent
	}
	testOpened(rel)
	fd, err := unix.Openat(r.dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return pack.Changed(rel, "File removed before we read it")
	}
	if errors.Is(err, unix.ELOOP) {
		return pack.Changed(rel, "file changed as we read it")
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
		return pack.Changed(rel, "file changed as we read it")
	}
	regions, sparse, err := pack.SparseRegions(fd, st)
	if err != nil {
		return fmt.Errorf("map the holes of %s: %w", rel, err)
	}
	if !sparse {
		regions = []pack.Region{{Offset: 0, Length: st.Size}}
	}
	var data int64
	for _, g := range regions {
		if g.Length > 0 {
			data += g.Length
			if sparse {
				e.Data = append(e.Data, [2]int64{g.Offset, g.Length})
			}
		}
	}
	if sparse && st.Size > data {
		e.Holes = st.Size - data
	}
	r.read.Files++
	r.read.Bytes += data
	if !sparse && data <= int64(r.avg/4) {
		err = r.small(fd, rel, data, e)
	} else {
		err = r.chunked(fd, rel, st.Size, regions, e)
	}
	if err != nil {
		return err
	}
	// What was read is what the walk saw only if nothing moved meanwhile (pack's test: size, mtime, ctime).
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if now.Size != st.Size || now.Mtim != st.Mtim || now.Ctim != st.Ctim {
		return pack.Changed(rel, "file changed as we read it")
	}
	return nil
}

// small reads a dense file no larger than FastCDC's least chunk: it is one chunk (FastCDC cuts nothing shorter), so
// its SHA-256 is the file's, hashed once.
func (r *reader) small(fd int, rel string, size int64, e *Entry) error {
	buf := make([]byte, size)
	for off := int64(0); off < size; {
		n, err := unix.Pread(fd, buf[off:], off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
		if n == 0 {
			return pack.Changed(rel, fmt.Sprintf("File shrank by %d bytes", size-off))
		}
		off += int64(n)
	}
	sum := sha256.Sum256(buf)
	e.Sha256 = hex.EncodeToString(sum[:])
	if size == 0 {
		return nil
	}
	return r.chunk(buf, sum, e, true)
}

// chunked reads the file's data regions in order through FastCDC; the whole content (holes as zeros) is hashed on
// the way.
func (r *reader) chunked(fd int, rel string, size int64, regions []pack.Region, e *Entry) error {
	r.whole.Reset()
	in := &regionReader{fd: fd, rel: rel, size: size, regions: regions, whole: r.whole}
	maxChunk := r.avg * 4
	// A chunker per file (fastcdc-go has no reset), so a buffer per file: it only needs to exceed the largest chunk,
	// and a larger one than the data serves nothing.
	var data int64
	for _, g := range regions {
		data += g.Length
	}
	buf := int(max(int64(maxChunk+1), min(int64(2*maxChunk), data+1)))
	c, err := fastcdc.NewChunker(in, fastcdc.Options{AverageSize: r.avg, MinSize: r.avg / 4, MaxSize: maxChunk, BufSize: buf})
	if err != nil {
		return err
	}
	for {
		ch, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := r.chunk(ch.Data, sha256.Sum256(ch.Data), e, false); err != nil {
			return err
		}
	}
	pack.HashZeros(r.whole, size-in.pos) // the hole the file ends in
	e.Sha256 = hex.EncodeToString(r.whole.Sum(nil))
	return nil
}

// chunk adds one chunk of the file to e: referenced if known, else queued to be compressed into the pack (owned:
// data is the framer's from there, else it is copied out of the chunker's buffer).
func (r *reader) chunk(data []byte, sum [32]byte, e *Entry, owned bool) error {
	at, fresh := r.table.lookup(sum, int64(len(data)))
	e.Chunks = append(e.Chunks, at)
	if fresh == nil {
		return nil
	}
	if !owned {
		data = append([]byte(nil), data...)
	}
	return r.frames.add(data, fresh)
}

// regionReader reads a file's data regions one after another, hashing the file as it reads back (zeros between).
type regionReader struct {
	fd      int
	rel     string
	size    int64
	regions []pack.Region
	whole   hash.Hash
	// pos: the file offset hashed up to; at: the region being read
	pos int64
	at  int
}

func (g *regionReader) Read(p []byte) (int, error) {
	for {
		if g.at == len(g.regions) {
			return 0, io.EOF
		}
		cur := g.regions[g.at]
		if g.pos < cur.Offset {
			pack.HashZeros(g.whole, cur.Offset-g.pos)
			g.pos = cur.Offset
		}
		if g.pos < cur.Offset+cur.Length {
			break
		}
		g.at++
	}
	cur := g.regions[g.at]
	p = p[:min(int64(len(p)), cur.Offset+cur.Length-g.pos)]
	for {
		n, err := unix.Pread(g.fd, p, g.pos)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", g.rel, err)
		}
		if n == 0 {
			return 0, pack.Changed(g.rel, fmt.Sprintf("File shrank by %d bytes", cur.Offset+cur.Length-g.pos))
		}
		g.whole.Write(p[:n])
		g.pos += int64(n)
		return n, nil
	}
}

func splitPath(rel string) (dir, name string) {
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] == '/' {
			return rel[:i], rel[i+1:]
		}
	}
	return "", rel
}

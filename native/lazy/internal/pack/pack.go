// Package pack is the backup engine: one pass over a tree that makes its archive and its manifest together.
//
//	walk (descriptors, sorted as the agent sorts) ──▶ for each entry kept by the selection:
//	    lstat (the manifest's stat key, the header's fields)
//	    regular file: open beneath its directory, check it is the inode the walk saw,
//	                  read it once: SHA-256 and the tar stream take the same bytes (sparse: only the data regions),
//	                  fstat again: size, mtime or ctime moved → fail naming the file (no torn copy is kept)
//	    tar header (PAX; GNU 1.0 sparse) ──▶ zstd (klauspost/compress, concurrent) ──▶ SHA-256 of the archive ──▶ out
//	    manifest entry ──▶ manifest file (streamed; renamed into place once the archive is whole)
//
// It stands in for the agent's own single pass (container/archive/archive.ts: a Node walk naming entries to GNU tar,
// node-tar parsing and hashing the tar stream, a zstd process, a second hash), which read every byte three times
// across four processes; here each byte is read once, in one process. The manifest equals the agent's entry by
// entry (same order, same fields), and the archive is what GNU tar and the agent's restore read.
package pack

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/czstd"
)

// Options: what to pack and how (the agent's TarFormat for zstd, and its compiled selection).
type Options struct {
	Root     string
	Manifest string
	// Level is zstd's level (3 by default, as `zstd -3`); Threads 0 means one per CPU (`zstd -T0`); Long a 128 MiB
	// window (`zstd --long=27`).
	Level     int
	Threads   int
	Long      bool
	Selection *Selection
}

// Result is what a pass made (the agent's SinglePassResult is made of it).
type Result struct {
	Bytes     int64  `json:"bytes"`
	Sha256    string `json:"sha256"`
	TarBytes  int64  `json:"tarBytes"`
	Entries   int    `json:"entries"`
	Totals    Totals `json:"totals"`
	JSONBytes int64  `json:"jsonBytes"`
	// the manifest file's SHA-256, hashed as it was written
	JSONSha256 string         `json:"jsonSha256"`
	Excluded   map[string]int `json:"excluded"`
	WalkMs     int64          `json:"walkMs"`
	Ms         int64          `json:"ms"`
}

// Error is a failure the agent answers with its own code (agent-error-codes.ts): a refused tree is bad_request
// naming the field, a tree that changed under the pass is tool_failed.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

func changed(rel, why string) error {
	return &Error{Code: "tool_failed", Message: fmt.Sprintf("the tree changed while it was archived, so no consistent archive was made; try again. %s (%s)", rel, why)}
}

type packer struct {
	opts Options
	sel  *selector
	tar  *tarWriter
	// writers: the manifest files this pass writes, which a walk of a tree holding them must not archive
	writers []*manifestWriter
	// sink takes each entry archived: the manifest itself, or (a delta) what merges it with the base's
	sink entrySink
	// flat: archive a directory's own header only, not what is below it (a delta names each entry it archives)
	flat bool
	hash hash.Hash
	buf  []byte
	// firstName: the first name archived of each inode with more than one link (dev, ino), and its size.
	firstName map[[2]uint64]linked
	// descend: during Pass.WalkPruned, whether to walk below a directory (nil: always)
	descend func(rel string) bool
}

type linked struct {
	path string
	size int64
}

// Run packs opts.Root into out (the zstd-compressed archive) and writes the manifest to opts.Manifest. On failure the
// manifest is not left behind, and out holds a torn archive the caller must discard.
func Run(opts Options, out io.Writer) (Result, error) {
	started := time.Now()
	sel, err := compileSelection(opts.Selection)
	if err != nil {
		return Result{}, &Error{Code: "bad_request", Message: err.Error(), Field: "selection"}
	}
	root, err := beneath.OpenRoot(opts.Root)
	if err != nil {
		return Result{}, fmt.Errorf("open %s: %w", opts.Root, err)
	}
	defer unix.Close(root)

	a, err := newArchiveOut(opts, out)
	if err != nil {
		return Result{}, err
	}
	m, err := newManifestWriter(opts.Manifest)
	if err != nil {
		return Result{}, err
	}
	p := &packer{opts: opts, sel: sel, tar: newTarWriter(a.in), writers: []*manifestWriter{m}, sink: m, hash: sha256.New(), buf: make([]byte, 1<<20), firstName: map[[2]uint64]linked{}}
	fail := func(err error) (Result, error) {
		m.abandon()
		return Result{}, err
	}
	if err := p.dir(root, "", opts.Root); err != nil {
		return fail(err)
	}
	walkMs := time.Since(started).Milliseconds()
	if err := a.close(p.tar); err != nil {
		return fail(err)
	}
	if err := m.finish(selectionRecord(opts.Selection, sel)); err != nil {
		return fail(err)
	}
	return Result{
		Bytes: a.hashed.n, Sha256: hex.EncodeToString(a.hashed.h.Sum(nil)), TarBytes: p.tar.raw.n, Entries: m.n, Totals: m.totals,
		JSONBytes: m.bytes, JSONSha256: hex.EncodeToString(m.sha.Sum(nil)), Excluded: sel.counts, WalkMs: walkMs, Ms: time.Since(started).Milliseconds(),
	}, nil
}

// archiveOut is the archive's way out: tar ──▶ zstd ──▶ SHA-256 and count ──▶ out.
type archiveOut struct {
	hashed *hashingWriter
	// the stream encoder (--long, or one thread), or frames of 8 MiB encoded on every core (frames.go)
	z io.WriteCloser
	// where the tar goes: the stream encoder behind a 1 MiB buffer; the frames straight, as they are a buffer already
	// (a second one only copied every byte once more)
	in io.Writer
}

// frameSize: each independent zstd frame's input when the archive is compressed on several cores (frames.go).
const frameSize = 8 << 20

func newArchiveOut(opts Options, out io.Writer) (*archiveOut, error) {
	hashed := &hashingWriter{w: out, h: sha256.New()}
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	level := opts.Level
	if level == 0 {
		level = 3
	}
	// The frame checksum (xxhash of the content, 3.3 % of the engine's CPU on the npm workspace) stays: it is what
	// makes a damaged archive zstd's error, a damaged transfer that is retried, rather than a file whose SHA-256
	// differs from its manifest's, which fails the restore for good (faults-integration, tried without it).
	zopts := []zstd.EOption{zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(threads)}
	if opts.Long {
		zopts = append(zopts, zstd.WithWindowSize(1<<27))
	}
	if opts.Long || threads == 1 {
		z, err := zstd.NewWriter(hashed, zopts...)
		if err != nil {
			return nil, err
		}
		return &archiveOut{hashed: hashed, z: z, in: bufio.NewWriterSize(z, 1<<20)}, nil
	}
	// Independent frames, one per core at once: EncodeAll on an encoder shared by the workers (it is safe for
	// concurrent use, up to its concurrency): zstd's C library where the build has it (czstd: ~20 % less CPU).
	enc, err := czstd.New(level, true, threads)
	if err != nil {
		return nil, err
	}
	z := newFrameWriter(hashed, enc, frameSize, threads)
	return &archiveOut{hashed: hashed, z: z, in: z}, nil
}

// close ends the tar stream and the zstd frame: the archive is whole.
func (a *archiveOut) close(t *tarWriter) error {
	if err := t.close(); err != nil {
		return err
	}
	if b, ok := a.in.(*bufio.Writer); ok {
		if err := b.Flush(); err != nil {
			return err
		}
	}
	return a.z.Close()
}

// selectionRecord is what the manifest says of the selection: its rules, and what the walk counted.
func selectionRecord(s *Selection, sel *selector) *Record {
	if s == nil || s.Record == nil {
		return nil
	}
	r := *s.Record
	r.Excluded = sel.counts
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	if r.Excludes == nil {
		r.Excludes = []string{}
	}
	return &r
}

// dir packs the entries of the directory held by fd (rel below the root; host its path, for messages), depth first.
func (p *packer) dir(fd int, rel, host string) error {
	names, err := beneath.Names(fd)
	if err != nil {
		return fmt.Errorf("read directory %s: %w", host, err)
	}
	sortNames(names)
	for _, name := range names {
		if !utf8.ValidString(name) {
			return notUTF8(host, name)
		}
		entryRel := name
		if rel != "" {
			entryRel = rel + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if gone(err) {
				continue // removed since its directory was read: simply not there any more
			}
			return fmt.Errorf("lstat %s: %w", filepath.Join(host, name), err)
		}
		kind := st.Mode & unix.S_IFMT
		if kind == unix.S_IFREG && p.ownFile(&st) {
			continue
		}
		if p.sel.excluded(entryRel, kind == unix.S_IFDIR, fd, name) {
			continue
		}
		if err := p.entry(fd, name, entryRel, host, &st); err != nil {
			return err
		}
	}
	return nil
}

func (p *packer) ownFile(st *unix.Stat_t) bool {
	for _, m := range p.writers {
		if m.is(st) {
			return true
		}
	}
	return false
}

func gone(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) }

// entry packs one entry the walk found.
func (p *packer) entry(dirfd int, name, rel, host string, st *unix.Stat_t) error {
	e := entryOf(rel, st)
	h := &tar.Header{Name: "./" + rel, Mode: int64(e.Mode), Uid: int(st.Uid), Gid: int(st.Gid), ModTime: mtimeOf(st)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return nil // a live endpoint, not content: tar leaves it out, and so does the manifest
	case unix.S_IFDIR:
		e.Type = "dir"
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		if err := p.emit(&e, h); err != nil || p.flat {
			return err
		}
		sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if gone(err) || errors.Is(err, unix.ELOOP) {
			return nil // removed or swapped for a symlink since: nothing below it to walk (never followed)
		}
		if err != nil {
			return fmt.Errorf("open directory %s: %w", filepath.Join(host, name), err)
		}
		defer unix.Close(sub)
		return p.dir(sub, rel, filepath.Join(host, name))
	case unix.S_IFLNK:
		target, err := readlinkat(dirfd, name)
		if gone(err) || errors.Is(err, unix.EINVAL) {
			return nil // removed (or replaced) since its lstat
		}
		if err != nil {
			return fmt.Errorf("readlink %s: %w", filepath.Join(host, name), err)
		}
		e.Type, e.Target, e.Size = "symlink", target, int64(len(target))
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
		return p.emit(&e, h)
	case unix.S_IFREG:
		return p.file(dirfd, name, rel, &e, h, st)
	default:
		e.Type = "other"
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFIFO:
			h.Typeflag = tar.TypeFifo
		case unix.S_IFCHR:
			h.Typeflag = tar.TypeChar
		case unix.S_IFBLK:
			h.Typeflag = tar.TypeBlock
		}
		h.Devmajor, h.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		return p.emit(&e, h)
	}
}

// entryOf is the manifest entry's fields that lstat gives, whatever the entry's type.
func entryOf(rel string, st *unix.Stat_t) Entry {
	return Entry{
		Path: rel, Mode: st.Mode & 0o7777, Mtime: manifestSeconds(mtimeOf(st)), UID: st.Uid, GID: st.Gid,
		Stat: Stat{
			Ino: strconv.FormatUint(st.Ino, 10), Dev: strconv.FormatUint(st.Dev, 10),
			MtimeNs: strconv.FormatInt(st.Mtim.Nano(), 10), CtimeNs: strconv.FormatInt(st.Ctim.Nano(), 10),
		},
	}
}

func (p *packer) emit(e *Entry, h *tar.Header) error {
	if err := p.tar.header(h); err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	return p.sink.add(e)
}

// entrySink takes the entries a pass archived, in order.
type entrySink interface{ add(*Entry) error }

func mtimeOf(st *unix.Stat_t) time.Time { return time.Unix(st.Mtim.Sec, st.Mtim.Nsec) }

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// hashingWriter counts and hashes the compressed archive on its way out.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (w *hashingWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.h.Write(b[:n])
	w.n += int64(n)
	return n, err
}

// Package unpack is the default restore's engine, the reverse of package pack: one process takes a tree's tar.zst
// from the store and leaves the tree beneath a staging root, checked against its manifest as the bytes pass.
//
//	presigned GET (resumed by Range after a break) or stdin ──▶ SHA-256 + count of the archive
//	    ──▶ zstd -d (klauspost/compress) ──▶ tar (archive/tar: PAX, GNU long names, GNU sparse 0.x/1.0 and old 'S')
//	    ──▶ for each entry:
//	        name → manifest path ("./a/" → "a"); absolute, '..', '.' or empty components refused (path_outside_root)
//	        not in the manifest (or a second time), or of another type there → a difference; nothing is made
//	        made through descriptors beneath the root: its parent opened with openat2(RESOLVE_BENEATH|
//	        RESOLVE_NO_SYMLINKS) (a symlink on the way fails the open, never redirects it), then O_CREAT|O_EXCL|
//	        O_NOFOLLOW files, mkdirat, symlinkat, mkfifoat, linkat to a file this archive made; each file's bytes
//	        hashed as they are written (a sparse entry's zero blocks left as holes); owners (keepOwners), mode
//	        (set-id bits of files cleared unless keepOwners), mtime in nanoseconds, on the descriptor
//	        compared with its manifest entry (type, mode, size, mtime, target, sha256, link: the agent's in-stream
//	        check, container/archive/tar-manifest.ts) → a difference
//	    directories' modes and times last, deepest first (their children's creation moved their mtimes)
//	    every manifest entry the archive did not hold → missing (a complete restore)
//
// Device nodes are never made (an overlay whiteout, char 0/0, is): what the agent's sanitize pass removes after
// tar is simply not made, so an archive without them needs no such pass. The differences are answered, not
// thrown, so the agent fails the restore with the same verify_failed message its own check gives; the caller
// removes the staging root on any failure (nothing outside it was touched).
package unpack

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/pack"
)

// Options: where the tree goes and how it is checked.
type Options struct {
	// Root is the staging directory, empty, made by the caller (mode 0700).
	Root string
	// KeepOwners keeps the archive's owners and files' set-id bits (the restore's keepOwnership); else the tree is
	// the caller's and set-id bits of files are cleared, as the agent's sanitize pass leaves it.
	KeepOwners bool
	// Complete: the archive holds the whole tree, so an expected entry it lacks is missing.
	Complete bool
	// Limit is how many differences are kept (all are counted); 20 when 0.
	Limit int
	// Unchecked: no manifest; every entry is made as the archive has it, beneath Root as always (an overlay
	// delta's layer, whose archive's SHA-256 the caller checks against its record, as GNU tar's extraction was).
	Unchecked bool
}

// Result is what an unpack did; Equal false with the differences when the archive is not its manifest's.
type Result struct {
	Bytes       int64        `json:"bytes"`
	Sha256      string       `json:"sha256"`
	TarBytes    int64        `json:"tarBytes"`
	Entries     int          `json:"entries"`
	Equal       bool         `json:"equal"`
	Counts      Counts       `json:"counts"`
	Differences []Difference `json:"differences"`
	Ms          int64        `json:"ms"`
}

// Error is a failure the agent answers with this code (agent-error-codes.ts), naming the field at fault: the same
// shape as pack's.
type Error = pack.Error

// Run unpacks the zstd-compressed tar read from archive beneath o.Root. expected answers the manifest; it is
// awaited once decompression has begun, so its download overlaps the archive's first bytes.
func Run(ctx context.Context, archive io.Reader, expected func() (*Expected, error), o Options) (*Result, error) {
	started := time.Now()
	if o.Limit <= 0 {
		o.Limit = 20
	}
	hashed := &countingHash{r: archive, h: sha256.New()}
	zr, err := zstd.NewReader(bufio.NewReaderSize(hashed, 1<<20), zstd.WithDecoderMaxWindow(1<<31))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	tarStream := &countingHash{r: &zstdErrors{zr}}
	root, err := beneath.OpenRoot(o.Root)
	if err != nil {
		return nil, fmt.Errorf("--root: %w", err)
	}
	x, err := expected()
	if err != nil {
		unix.Close(root)
		return nil, err
	}
	e := newExtractor(root, x, o)
	defer e.close()
	tr := tar.NewReader(tarStream)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, streamError(err)
		}
		if err := e.entry(hdr, tr); err != nil {
			return nil, err
		}
	}
	// What follows the tar's end (its zero blocks, a zstd frame's checksum) is read too: the archive's SHA-256 is
	// of every byte, and zstd checks its frames only when they are read to the end.
	if _, err := io.Copy(io.Discard, tarStream); err != nil {
		return nil, streamError(err)
	}
	if _, err := io.Copy(io.Discard, hashed); err != nil {
		return nil, streamError(err)
	}
	if err := e.Finish(); err != nil {
		return nil, err
	}
	if o.Complete {
		for _, w := range x.Entries {
			if !w.seen {
				e.diffs.Note(Difference{Path: w.Path, Kind: "missing"})
			}
		}
	}
	diffs := e.diffs.list
	if diffs == nil {
		diffs = []Difference{}
	}
	return &Result{
		Bytes: hashed.n, Sha256: hex.EncodeToString(hashed.h.Sum(nil)), TarBytes: tarStream.n, Entries: e.entries,
		Equal: e.diffs.Equal(), Counts: e.diffs.counts, Differences: diffs, Ms: time.Since(started).Milliseconds(),
	}, nil
}

// streamError: the download's own failure as it is; a stream that does not decompress or parse is tool_failed,
// named for what failed first (zstd's "corrupt" is the cause; tar's "unexpected EOF" would be its consequence).
func streamError(err error) error {
	var known *Error
	if errors.As(err, &known) {
		return known
	}
	var z *zstdError
	if errors.As(err, &z) {
		return &Error{Code: "tool_failed", Message: "zstd: data corruption detected, the archive does not decompress: " + z.err.Error()}
	}
	return &Error{Code: "tool_failed", Message: "the tar stream does not parse: " + err.Error()}
}

// zstdErrors marks the decompressor's own failures (not the download's, which it passes on).
type zstdErrors struct{ r io.Reader }

type zstdError struct{ err error }

func (e *zstdError) Error() string { return "zstd: " + e.err.Error() }
func (e *zstdError) Unwrap() error { return e.err }

func (z *zstdErrors) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	if err != nil && err != io.EOF {
		var known *Error
		if !errors.As(err, &known) {
			err = &zstdError{err}
		}
	}
	return n, err
}

// countingHash counts (and, with h, hashes) the bytes read through it.
type countingHash struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *countingHash) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.h != nil && n > 0 {
		c.h.Write(p[:n])
	}
	return n, err
}

package pack

// A tar delta in one process: what changed since a base snapshot, found by metadata as restic and git's index find it,
// archived with each changed file read once, and the manifest written as a layer over the base's.
//
//	base manifest (the agent's kept copy: streamed, SHA-256 checked) ─┐   read while the tree is walked
//	walk (lstat only, the agent's order and selection) ───────────────┴─▶ classify (delta_classify.go)
//	    ──▶ suspects hashed (their content decides) ──▶ the list: changed entries, their hard-link groups, parents
//	    ──▶ each listed entry: lstat, tar header, content read once into SHA-256 and tar ──▶ zstd ──▶ out
//	    ──▶ merged: listed entries as archived, the others as the base has them, each with this walk's key
//	        ├─▶ the layer manifest (opts.Manifest): entries that differ from the base's, the deletions
//	        └─▶ the tree's whole manifest (Delta.Keep): what the next delta reads as its base
//
// It stands in for the agent's pass with a base (container/archive/archive.ts singlePassInto and delta.ts), whose
// Node walk of 31.7k entries and classification came before tar's first name; both make the same archive listing and
// the same manifests (test/node/delta-engine-integration.test.ts compares them on every kind of change).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
)

// Delta is what turns a pass into a delta.
type Delta struct {
	// Base: the base snapshot's whole-tree manifest (the agent's kept copy), and the SHA-256 its record keeps for it
	Base   string `json:"base"`
	Sha256 string `json:"sha256"`
	// LayerOver: write the manifest as a layer (version 2) over this snapshot; empty: the tree's whole manifest
	LayerOver string `json:"layerOver,omitempty"`
	// Keep: with LayerOver, where the tree's whole manifest is written too, for the next delta
	Keep string `json:"keep,omitempty"`
	// Rehash: compare the content of every file whose metadata agrees (users who distrust timestamps)
	Rehash bool `json:"rehash,omitempty"`
}

// DeltaResult is Result for a delta (the agent's SinglePassResult with `delta`): Entries and Totals are the whole
// tree's; JSONBytes and JSONSha256 the manifest file's (a layer, when LayerOf is set).
type DeltaResult struct {
	Result
	// Archived: the entries the archive holds
	Archived int    `json:"archived"`
	LayerOf  string `json:"layerOf,omitempty"`
	// TreeSha256: of the whole manifest written to Keep
	TreeSha256 string      `json:"treeSha256,omitempty"`
	Delta      DeltaCounts `json:"delta"`
}

// DeltaCounts: what changed (as the agent's pass reports it).
type DeltaCounts struct {
	Changed      int      `json:"changed"`
	ChangedBytes int64    `json:"changedBytes"`
	Deleted      []string `json:"deleted"`
	Suspects     int      `json:"suspects"`
	SuspectBytes int64    `json:"suspectBytes"`
	PlanMs       int64    `json:"planMs"`
}

type baseRead struct {
	base *baseManifest
	err  error
}

// RunDelta makes the delta of opts.Root against d.Base into out and writes its manifests. A base it cannot use fails
// with BaseUnusable before a byte is written; any other failure leaves no manifest behind, and out holds a torn
// archive the caller must discard.
func RunDelta(opts Options, d Delta, out io.Writer) (DeltaResult, error) {
	started := time.Now()
	sel, err := compileSelection(opts.Selection)
	if err != nil {
		return DeltaResult{}, &Error{Code: "bad_request", Message: err.Error(), Field: "selection"}
	}
	root, err := beneath.OpenRoot(opts.Root)
	if err != nil {
		return DeltaResult{}, fmt.Errorf("open %s: %w", opts.Root, err)
	}
	defer unix.Close(root)
	based := make(chan baseRead, 1)
	go func() {
		b, err := readBase(d.Base, d.Sha256)
		based <- baseRead{b, err}
	}()

	// The manifest files exist before the walk (nameless until the end), so the walk never meets them.
	w, err := newDeltaWriters(opts.Manifest, d)
	if err != nil {
		return DeltaResult{}, err
	}
	fail := func(err error) (DeltaResult, error) {
		w.abandon()
		return DeltaResult{}, err
	}
	p := &packer{opts: opts, sel: sel, writers: w.all(), flat: true, hash: sha256.New(), buf: make([]byte, 1<<20), firstName: map[[2]uint64]linked{}}
	var walk []walked
	if err := p.walkTree(root, "", opts.Root, &walk, map[[2]uint64]string{}); err != nil {
		return fail(err)
	}
	walkMs := time.Since(started).Milliseconds()
	read := <-based
	if read.err != nil {
		return fail(read.err)
	}
	base := read.base

	c := classify(walk, base, d.Rehash)
	suspectBytes := confirmSuspects(root, walk, base, c)
	list := archiveList(walk, c)
	counts := DeltaCounts{Changed: c.nChanged, Deleted: c.deleted, Suspects: len(c.suspects), SuspectBytes: suspectBytes}
	if counts.Deleted == nil {
		counts.Deleted = []string{}
	}
	for i := range walk {
		if c.changed[i] && walk[i].kind() == "file" {
			counts.ChangedBytes += walk[i].size()
		}
	}
	counts.PlanMs = time.Since(started).Milliseconds()

	a, err := newArchiveOut(opts, out)
	if err != nil {
		return fail(err)
	}
	p.tar = newTarWriter(a.in)
	archived := &archivedEntries{byPath: make(map[string]Entry, len(list))}
	p.sink = archived
	if err := p.archiveListed(root, walk, list, archived); err != nil {
		return fail(err)
	}
	if err := a.close(p.tar); err != nil {
		return fail(err)
	}
	totals, err := w.merge(walk, base, c, archived)
	if err != nil {
		return fail(err)
	}
	record := selectionRecord(opts.Selection, sel)
	if err := w.finish(c.deleted, totals, record); err != nil {
		return fail(err)
	}
	r := DeltaResult{
		Result: Result{
			Bytes: a.hashed.n, Sha256: hex.EncodeToString(a.hashed.h.Sum(nil)), TarBytes: p.tar.raw.n, Entries: len(walk), Totals: totals,
			JSONBytes: w.manifest.bytes, JSONSha256: hex.EncodeToString(w.manifest.sha.Sum(nil)), Excluded: sel.counts, WalkMs: walkMs,
		},
		Archived: archived.n, LayerOf: d.LayerOver, Delta: counts,
	}
	if w.tree != nil && w.tree != w.manifest {
		r.TreeSha256 = hex.EncodeToString(w.tree.sha.Sum(nil))
	}
	r.Ms = time.Since(started).Milliseconds()
	return r, nil
}

// confirmSuspects hashes the suspects (a few at a time) and marks those whose content is not the base's as changed
// (one that cannot be read is changed: archiving it then says why); answers the bytes hashed.
func confirmSuspects(root int, walk []walked, base *baseManifest, c *classification) int64 {
	differs := make([]bool, len(c.suspects))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(4, len(c.suspects)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < len(c.suspects); k = int(next.Add(1) - 1) {
				i := c.suspects[k]
				sum, err := hashBeneath(root, walk[i].path)
				differs[k] = err != nil || sum != base.entries[c.baseOf[i]].Sha256
			}
		}()
	}
	wg.Wait()
	var bytes int64
	for k, i := range c.suspects {
		bytes += walk[i].size()
		if differs[k] {
			c.mark(i)
		}
	}
	return bytes
}

// hashBeneath is the SHA-256 of the regular file at rel below root, opened without following a symlink on the way.
func hashBeneath(root int, rel string) (string, error) {
	dirRel, name := splitPath(rel)
	dir, err := beneath.OpenDirBeneath(root, dirRel)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func splitPath(rel string) (dir, name string) {
	if slash := strings.LastIndexByte(rel, '/'); slash >= 0 {
		return rel[:slash], rel[slash+1:]
	}
	return "", rel
}

// archivedEntries collects the entries a delta archived, by path.
type archivedEntries struct {
	byPath map[string]Entry
	n      int
}

func (a *archivedEntries) add(e *Entry) error {
	a.byPath[e.Path] = *e
	a.n++
	return nil
}

// archiveListed archives the listed walk entries, each from a fresh lstat (as tar, given a list, reads them): one
// that is gone, or no longer something tar archives, fails the delta as the tree having changed under it.
func (p *packer) archiveListed(root int, walk []walked, list []int, archived *archivedEntries) error {
	dirRel, dir := "", -1
	defer func() {
		if dir >= 0 {
			unix.Close(dir)
		}
	}()
	for _, i := range list {
		rel := walk[i].path
		parent, name := splitPath(rel)
		if dir < 0 || parent != dirRel {
			if dir >= 0 {
				unix.Close(dir)
			}
			var err error
			if dir, err = beneath.OpenDirBeneath(root, parent); err != nil {
				dir = -1
				return changed(rel, "Cannot stat: No such file or directory")
			}
			dirRel = parent
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if gone(err) {
				return changed(rel, "Cannot stat: No such file or directory")
			}
			return fmt.Errorf("lstat %s: %w", filepath.Join(p.opts.Root, rel), err)
		}
		before := archived.n
		if err := p.entry(dir, name, rel, filepath.Join(p.opts.Root, parent), &st); err != nil {
			return err
		}
		if archived.n == before {
			return changed(rel, "file changed as we read it")
		}
	}
	return nil
}

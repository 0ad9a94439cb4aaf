package filecas

// The extract restore of the file-level format: a tree made beneath an empty staging root from a decoded (and so
// validated) index and its packs' presigned URLs.
//
//	tree pass, in index order (internal/unpack's Maker: descriptors beneath the root, nothing followed):
//	    directories (mkdirat, 0700 for now), symlinks, FIFOs ("fifo" nodes; devices are never made), files
//	    without chunks (empty, or all hole: ftruncate);
//	    every file's parent made on the way, so a symlink where a directory should be refuses the index here,
//	    before a byte is fetched
//	plan: each distinct chunk once with every (file, position) it goes to; each pack's chunks in offset order
//	    coalesced into Range requests (a gap ≤ 1 MiB read and discarded, a request ≤ 8 MiB), chained where a file
//	    runs on from one request into the next (a chain runs on one fetcher, in order)
//	Concurrency fetchers, each taking the next chain:
//	    Range GET (resumed after a break, abandoned after Idle of silence, retried: internal/unpack's Download)
//	    ──▶ per chunk: zstd frame decoded (bounded by MaxChunk) ──▶ SHA-256 == its name, or verify_failed
//	    ──▶ written to every use: the file made O_CREAT|O_EXCL|O_NOFOLLOW beneath the root on its first chunk
//	        (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), pwrite at the chunk's place in the data regions (a
//	        sparse file's zero blocks left as holes), hashed in chunk order (an early chunk read back when its turn
//	        comes); the last chunk in: SHA-256 against the entry (a difference), size, owner (keepOwners), mode
//	        (set-id bits cleared without keepOwners), ns mtime
//	hard links (linkat, only to a file made here), then directories' modes and times, deepest first
//	walk (optional): the made tree's metadata against the index, as internal/unpack's Walk compares a manifest
//
// Memory: the index, one entry of state per file, and per fetcher a request's read buffer and one chunk compressed
// and decoded (≤ MaxChunk): never a pack. On any failure the caller discards the staging root.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/pack"
	"snapflow/native/lazy/internal/unpack"
)

// Error is a failure the agent answers with this code (agent-error-codes.ts), naming the field at fault.
type Error = pack.Error

// UnpackOptions: where the tree goes, where the packs are, how they are fetched.
type UnpackOptions struct {
	// Root is the staging directory, empty, made by the caller.
	Root string
	// Packs: each pack's presigned GET URL, by the pack's name.
	Packs      map[string]string
	KeepOwners bool
	// Walk: read the made tree back and compare its metadata with the index.
	Walk        bool
	Idle        time.Duration
	Retries     int
	Concurrency int
	// Limit is how many differences are named (all are counted); 20 when 0.
	Limit int
	// Gap and Span shape the requests (1 MiB and 8 MiB when 0); Limits.MaxChunk bounds a chunk's decoded size.
	Gap, Span int64
	Limits    Limits
	Client    *http.Client
}

// UnpackResult is what a restore did; Equal false with the differences when the tree is not the index's.
type UnpackResult struct {
	Entries      int                 `json:"entries"`
	Files        int64               `json:"files"`
	Bytes        int64               `json:"bytes"`
	Chunks       int64               `json:"chunks"`
	Requests     int64               `json:"requests"`
	Ranges       int                 `json:"ranges"`
	FetchedBytes int64               `json:"fetchedBytes"`
	RereadBytes  int64               `json:"rereadBytes"`
	Equal        bool                `json:"equal"`
	Counts       unpack.Counts       `json:"counts"`
	Differences  []unpack.Difference `json:"differences"`
	// Walked: the walk's entries and time, when asked (its differences are among the ones above)
	Walked *Walked `json:"walked,omitempty"`
	Ms     int64   `json:"ms"`
}

// Walked is what the metadata walk saw.
type Walked struct {
	Entries int    `json:"entries"`
	Ms      int64  `json:"ms"`
	Owners  string `json:"owners,omitempty"`
	Sparse  string `json:"sparse,omitempty"`
}

// restore is one run's shared state.
type restore struct {
	x     *Index
	o     UnpackOptions
	maker *unpack.Maker
	plan  *plan

	mu    sync.Mutex
	diffs *unpack.Differences

	files, bytes, chunks, requests, fetched, reread atomic.Int64
}

func (r *restore) note(d unpack.Difference) {
	r.mu.Lock()
	r.diffs.Note(d)
	r.mu.Unlock()
}

// Unpack makes the index's tree beneath o.Root (see the file's comment). x must come from Decode (validated).
func Unpack(ctx context.Context, x *Index, o UnpackOptions) (*UnpackResult, error) {
	started := time.Now()
	if o.Limit <= 0 {
		o.Limit = 20
	}
	if o.Gap <= 0 {
		o.Gap = 1 << 20
	}
	if o.Span <= 0 {
		o.Span = 8 << 20
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Limits.MaxChunk <= 0 {
		o.Limits = DefaultLimits
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	p, err := makePlan(x, o.Packs, o.Gap, o.Span)
	if err != nil {
		return nil, err
	}
	root, err := beneath.OpenRoot(o.Root)
	if err != nil {
		return nil, err
	}
	r := &restore{x: x, o: o, maker: unpack.NewMaker(root, o.KeepOwners).NamedFor("index"), plan: p, diffs: unpack.NewDifferences(o.Limit)}
	defer r.maker.Close()
	if err := r.tree(); err != nil {
		return nil, err
	}
	if err := r.fetchAll(ctx); err != nil {
		return nil, err
	}
	if err := r.links(); err != nil {
		return nil, err
	}
	if err := r.maker.Finish(); err != nil {
		return nil, err
	}
	res := &UnpackResult{
		Entries: len(x.Entries), Ranges: len(p.requests),
		Files: r.files.Load(), Bytes: r.bytes.Load(), Chunks: r.chunks.Load(), Requests: r.requests.Load(), FetchedBytes: r.fetched.Load(), RereadBytes: r.reread.Load(),
	}
	if o.Walk {
		w, err := unpack.Walk(o.Root, expectedOf(x), o.KeepOwners, o.Limit)
		if err != nil {
			return nil, err
		}
		for _, d := range w.Differences {
			r.diffs.Note(d)
		}
		// The walk names its first `limit` differences and counts them all: the ones it did not name are counted too.
		res.Walked = &Walked{Entries: w.Entries, Ms: w.Ms, Owners: w.Owners, Sparse: w.Sparse}
		res.Counts = addCounts(r.diffs.Counts(), w.Counts, w.Differences)
	} else {
		res.Counts = r.diffs.Counts()
	}
	res.Differences = r.diffs.List()
	res.Equal = res.Counts.Missing+res.Counts.Extra+res.Counts.Changed == 0
	res.Ms = time.Since(started).Milliseconds()
	return res, nil
}

// addCounts: the content check's counts (which already hold the walk's named differences) plus the walk's unnamed.
func addCounts(all, walk unpack.Counts, named []unpack.Difference) unpack.Counts {
	var n unpack.Counts
	for _, d := range named {
		switch d.Kind {
		case "missing":
			n.Missing++
		case "extra":
			n.Extra++
		default:
			n.Changed++
		}
	}
	return unpack.Counts{Missing: all.Missing + walk.Missing - n.Missing, Extra: all.Extra + walk.Extra - n.Extra, Changed: all.Changed + walk.Changed - n.Changed}
}

// tree makes, in index order, every entry but the content of files and the hard links: directories, symlinks,
// FIFOs and empty files, and every file's parent.
func (r *restore) tree() error {
	m := r.maker
	for i := range r.x.Entries {
		e := &r.x.Entries[i]
		if e.Path == "" {
			continue // the staging root itself, whose metadata no restore sets
		}
		mtime := mtimeOf(e)
		uid, gid := int(e.UID), int(e.GID)
		var err error
		switch {
		case e.Type == "dir":
			err = m.Dir(e.Path, e.Mode&0o7777, uid, gid, mtime)
		case e.Type == "symlink":
			err = m.Symlink(e.Path, e.Target, uid, gid, mtime)
		case e.Type == "other" && e.Node == "fifo":
			err = m.Fifo(e.Path, e.Mode&0o7777, uid, gid, mtime)
		case e.Type == "other":
			// A device node: a door to the host's hardware, never made; the walk then finds it missing.
		case e.Link != "":
			// made once the files are (linkat only to a file made here)
		case len(e.Chunks) == 0:
			err = r.emptyFile(e, mtime)
		default:
			parentRel, _ := splitName(e.Path)
			_, err = m.Parent(parentRel, e.Path)
			m.MadeFile(e.Path, e.Size)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

const emptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// emptyFile makes a file without chunks: empty, or all hole (no data, holes equal to its size: ftruncate makes it).
func (r *restore) emptyFile(e *Entry, mtime unix.Timespec) error {
	fd, err := r.maker.CreateFile(e.Path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	sum := emptySha256
	if e.Size > 0 {
		if err := unix.Ftruncate(fd, e.Size); err != nil {
			return unpack.MadeError(e.Path, err)
		}
		h := sha256.New()
		for n := e.Size; n > 0; n -= min(n, int64(len(zeroBlock))) {
			h.Write(zeroBlock[:min(n, int64(len(zeroBlock)))])
		}
		sum = hex.EncodeToString(h.Sum(nil))
	}
	if err := r.maker.SetFile(fd, e.Path, e.Mode&0o7777, int(e.UID), int(e.GID), mtime); err != nil {
		return err
	}
	if e.Sha256 != sum {
		r.note(unpack.Difference{Path: e.Path, Kind: "changed", Fields: []unpack.Field{{Name: "sha256", Expected: optional(e.Sha256), Actual: sum}}})
	}
	r.maker.MadeFile(e.Path, e.Size)
	r.files.Add(1)
	return nil
}

// fetchAll runs the plan's requests on Concurrency fetchers; the first failure stops the others.
func (r *restore) fetchAll(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan []request)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	for range min(r.o.Concurrency, max(1, len(r.plan.chains))) {
		f, err := newFetcher(r)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.close()
			for chain := range next {
				for _, q := range chain {
					if err := f.run(ctx, q); err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	go func() {
		defer close(next)
		for _, c := range r.plan.chains {
			select {
			case next <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	// Closes whatever a failure left open (finished files are closed already).
	for _, f := range r.plan.files {
		if f.fd >= 0 {
			unix.Close(f.fd)
			f.fd = -1
		}
	}
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, f := range r.plan.files {
		if !f.done {
			return &Error{Code: "tool_failed", Message: "restoring " + f.e.Path + ": not every chunk of it came"}
		}
	}
	return nil
}

// links makes the hard links, in index order, each to a regular file made here.
func (r *restore) links() error {
	for i := range r.x.Entries {
		e := &r.x.Entries[i]
		if e.Type == "file" && e.Link != "" {
			if err := r.maker.Link(e.Path, e.Link); err != nil {
				return err
			}
		}
	}
	return nil
}

// mtimeOf is the entry's mtime in nanoseconds (its stat's mtimeNs), or its seconds where that is absent or odd.
func mtimeOf(e *Entry) unix.Timespec {
	if ns, err := strconv.ParseInt(e.Stat.MtimeNs, 10, 64); err == nil && e.Stat.MtimeNs != "" {
		return unix.NsecToTimespec(ns)
	}
	return unix.Timespec{Sec: e.Mtime}
}

// expectedOf is the index's entries as a manifest for internal/unpack's Walk (the root itself left out).
func expectedOf(x *Index) *unpack.Expected {
	out := make([]*unpack.Want, 0, len(x.Entries))
	for i := range x.Entries {
		e := &x.Entries[i]
		if e.Path == "" {
			continue
		}
		mode, size, mtime, uid, gid := int64(e.Mode&0o7777), e.Size, e.Mtime, int64(e.UID), int64(e.GID)
		out = append(out, &unpack.Want{Path: e.Path, Type: e.Type, Mode: &mode, Size: &size, Mtime: &mtime, Target: e.Target, Sha256: e.Sha256, Link: e.Link, UID: &uid, GID: &gid, Holes: e.Holes})
	}
	return unpack.NewExpected(out)
}

// splitName answers a name's parent ("" for the root) and last component.
func splitName(p string) (string, string) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i], p[i+1:]
		}
	}
	return "", p
}

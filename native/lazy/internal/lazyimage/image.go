// Package lazyimage serves an image's bytes from its chunks as they become local. A read finds the chunks under its
// range, fetches any that are not yet cached (on demand: fetch → verify SHA-256 → store in the cache), then copies
// from the cache. A chunk that cannot be had fails the read; nothing unverified is ever copied out. One fetch serves
// everyone waiting for the same chunk. The prefetcher (prefetch.go) fills in the rest; status.go reports progress.
package lazyimage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"snapflow/native/lazy/internal/cache"
	"snapflow/native/lazy/internal/chunkwait"
	"snapflow/native/lazy/internal/fetch"
	"snapflow/native/lazy/internal/index"
)

// How a chunk became local.
const (
	FromCache  = "cache"  // already in the cache directory at start
	OnDemand   = "demand" // fetched because a read needed it
	Ahead      = "ahead"  // fetched by the prefetcher before any read asked
	neighbours = 4        // chunks after an on-demand chunk queued first for prefetch
)

// ErrUnavailable wraps every read failure; the FUSE layer turns it into EIO.
var ErrUnavailable = errors.New("chunk unavailable")

type chunkState struct {
	chunkwait.Slot      // local, the running fetch, the last failure
	read           bool // a read has copied from it (whoever fetched it)
	suggested      bool // queued as the neighbour of a read: its own first read moves the suggestion on
	source         string
}

// DefaultInvalidHold: a chunk whose bytes just failed their SHA-256 after every retry fails the reads that need it at
// once for this long (Image.InvalidHold), instead of each read fetching it again. The store answered, and answered
// wrong bytes, so an immediate refetch almost never helps, and a tree walk over a damaged chunk's files made one
// ~0.6 s fetch per file (a lazy restore took ~40 s to fail). The prefetcher's later passes still try it again.
const DefaultInvalidHold = 10 * time.Second

// Failure is a chunk whose last fetch failed.
type Failure = chunkwait.Failure

// Image is one lazily materialised image. Its state is per distinct chunk: an image can repeat a chunk, and one fetch
// makes every copy local.
type Image struct {
	InvalidHold time.Duration // see DefaultInvalidHold; set before the image is shared

	life    context.Context // fetches run under it, not under a reader's context: others may be waiting on them
	idx     *index.Index
	cache   *cache.Dir
	fetcher *fetch.Fetcher
	start   time.Time

	distinct []index.Chunk // distinct chunks in first-use order
	first    []int         // distinct id → first index position
	of       []int         // index position → distinct id

	mu       sync.Mutex
	st       []chunkState
	local    int
	counts   counters
	hints    []int         // distinct ids suggested by reads; a stack, so the latest read's neighbours go first
	hinted   chan struct{} // closed (and replaced) when hints are added: wakes prefetch workers waiting out a quiet spell
	demandAt time.Time     // when a read last had to fetch (the mount's start until one did); the sweep waits for quiet
	prefetch string        // "pending" until Prefetch starts, "running", then "done" (passes spent, complete, or stopped)
	complete chan struct{}
	changed  chan struct{} // poked (non-blocking) whenever status should be rewritten
}

type counters struct {
	cached, onDemand, ahead, read                    int
	bytesLocal, bytesOnDemand, bytesAhead, bytesRead int64
	attempts                                         int
	firstReadMs, completeMs, readyMs                 int64
	onDemandList                                     []Fetched
	failed                                           map[int]*Failure
}

// Fetched names a chunk fetched on demand and when.
type Fetched struct {
	Index  int    `json:"index"`
	SHA256 string `json:"sha256"`
	AtMs   int64  `json:"atMs"`
}

// New builds the state, counting chunks already in the cache as local. start is the moment the restore's mount began,
// the zero of every *Ms figure; ending life abandons every running fetch.
func New(life context.Context, idx *index.Index, c *cache.Dir, f *fetch.Fetcher, start time.Time) *Image {
	img := &Image{InvalidHold: DefaultInvalidHold, life: life, idx: idx, cache: c, fetcher: f, start: start, prefetch: "pending", complete: make(chan struct{}), changed: make(chan struct{}, 1), hinted: make(chan struct{}), demandAt: start}
	ids := make(map[string]int, len(idx.Chunks))
	img.of = make([]int, len(idx.Chunks))
	img.distinct = make([]index.Chunk, 0, len(idx.Chunks))
	img.first = make([]int, 0, len(idx.Chunks))
	for i, ch := range idx.Chunks {
		d, ok := ids[ch.SHA256]
		if !ok {
			d = len(img.distinct)
			ids[ch.SHA256] = d
			img.distinct = append(img.distinct, ch)
			img.first = append(img.first, i)
		}
		img.of[i] = d
	}
	img.st = make([]chunkState, len(img.distinct))
	img.counts = counters{firstReadMs: -1, completeMs: -1, readyMs: -1, failed: map[int]*Failure{}}
	cached, _ := c.Names() // unreadable: nothing counts as cached, every chunk is fetched
	for d, ch := range img.distinct {
		if cached[ch.SHA256] && c.Has(ch.SHA256, ch.Size) {
			img.st[d] = chunkState{Slot: chunkwait.Slot{Local: true}, source: FromCache}
			img.local++
			img.counts.cached++
			img.counts.bytesLocal += ch.Size
		}
	}
	img.checkComplete()
	return img
}

func (img *Image) ms() int64 { return time.Since(img.start).Milliseconds() }

// Size is the image's length in bytes.
func (img *Image) Size() int64 { return img.idx.Size }

// Complete is closed once every chunk is local.
func (img *Image) Complete() <-chan struct{} { return img.complete }

// MarkReady records when the mount first answered.
func (img *Image) MarkReady() {
	img.mu.Lock()
	img.counts.readyMs = img.ms()
	img.mu.Unlock()
	img.poke()
}

// ReadAt fills p from offset off. It returns fewer bytes only at the end of the image, and an error wrapping
// ErrUnavailable when a chunk under the range cannot be fetched and verified.
func (img *Image) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	first, last, ok := img.idx.Span(off, int64(len(p)))
	if !ok {
		return 0, nil
	}
	img.noteFirstRead()
	for i := first; i <= last; i++ {
		if err := img.ensure(ctx, img.of[i], OnDemand); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		img.noteRead(img.of[i])
	}
	n := 0
	end := min(off+int64(len(p)), img.idx.Size)
	for i := first; i <= last; i++ {
		ch := img.idx.Chunks[i]
		from := max(off, ch.Offset)
		to := min(end, ch.Offset+ch.Size)
		if err := img.cache.ReadAt(ch.SHA256, p[from-off:to-off], from-ch.Offset); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		n += int(to - from)
	}
	return n, nil
}

func (img *Image) noteFirstRead() {
	img.mu.Lock()
	if img.counts.firstReadMs < 0 {
		img.counts.firstReadMs = img.ms()
	}
	img.mu.Unlock()
}

// noteRead counts distinct chunk d as read, once: what the readers needed, whether a read or the prefetcher fetched it.
// The first read of a suggested neighbour suggests the chunks after it, so a reader going through a file keeps finding
// them local (a readahead window, as the kernel's page cache keeps one).
func (img *Image) noteRead(d int) {
	img.mu.Lock()
	if s := &img.st[d]; !s.read {
		s.read = true
		img.counts.read++
		img.counts.bytesRead += img.distinct[d].Size
		if s.suggested {
			img.pushHints(d)
		}
	}
	img.mu.Unlock()
}

// ensure makes distinct chunk d local. One fetch per chunk runs at a time and everyone needing the chunk waits for it;
// ctx bounds only the wait. An on-demand caller whose wait ended in someone else's failure starts one fetch of its
// own, so a read never fails only because the prefetcher gave up earlier.
func (img *Image) ensure(ctx context.Context, d int, source string) error {
	return chunkwait.Ensure(ctx, &img.mu, &img.st[d].Slot, source == OnDemand, img.InvalidHold, func() {
		if source == OnDemand {
			img.demandAt = time.Now()
			img.pushHints(d)
		}
		go img.fetch(d, source)
	})
}

// fetch runs one fetch of chunk d and records its outcome; the caller set st[d].Inflight.
func (img *Image) fetch(d int, source string) {
	ch := img.distinct[d]
	res, err := img.fetcher.Get(img.life, ch.SHA256, ch.Size)
	if err == nil {
		err = img.cache.Put(ch.SHA256, res.Data)
	}
	img.mu.Lock()
	s := &img.st[d]
	img.counts.attempts += res.Attempts
	if err == nil {
		s.source = source
		s.End(nil, false)
		img.local++
		img.counts.bytesLocal += ch.Size
		delete(img.counts.failed, d)
		if source == OnDemand {
			img.counts.onDemand++
			img.counts.bytesOnDemand += ch.Size
			img.counts.onDemandList = append(img.counts.onDemandList, Fetched{Index: img.first[d], SHA256: ch.SHA256, AtMs: img.ms()})
		} else {
			img.counts.ahead++
			img.counts.bytesAhead += ch.Size
		}
	} else {
		f := &Failure{Index: img.first[d], SHA256: ch.SHA256, Reason: err.Error(), Attempts: res.Attempts, AtMs: img.ms()}
		var invalid *fetch.ChunkInvalid
		s.End(f, errors.As(err, &invalid))
		img.counts.failed[d] = f
	}
	img.checkComplete()
	img.mu.Unlock()
	img.poke()
}

// checkComplete closes complete once every chunk is local; called with mu held (or before sharing).
func (img *Image) checkComplete() {
	if img.local == len(img.distinct) && img.counts.completeMs < 0 {
		img.counts.completeMs = img.ms()
		close(img.complete)
	}
}

// pushHints suggests the chunks after d to the prefetcher (called with mu held).
func (img *Image) pushHints(d int) {
	added := false
	for n := min(d+neighbours, len(img.distinct)-1); n > d; n-- {
		if s := &img.st[n]; s.Startable() {
			img.hints = append(img.hints, n)
			s.suggested = true
			added = true
		}
	}
	if added {
		close(img.hinted)
		img.hinted = make(chan struct{})
	}
}

func (img *Image) poke() {
	select {
	case img.changed <- struct{}{}:
	default:
	}
}

package filesfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"snapflow/native/lazy/internal/chunkwait"
	"snapflow/native/lazy/internal/fetch"
	"snapflow/native/lazy/internal/filecas"
)

// How a chunk became local.
const (
	FromCache = "cache"  // in the cache directory at start
	OnDemand  = "demand" // fetched because a read needed it
	Ahead     = "ahead"  // fetched by the prefetcher
)

// DefaultInvalidHold: a chunk whose frame just failed its SHA-256 after every retry fails the reads that need it at
// once for this long, instead of each read fetching it again (the image mount's rule: lazyimage.DefaultInvalidHold).
const DefaultInvalidHold = 10 * time.Second

// ErrUnavailable wraps every read failure; the FUSE layer turns it into EIO.
var ErrUnavailable = errors.New("chunk unavailable")

type chunkState struct {
	chunkwait.Slot // local, the running fetch, the last failure
	read           bool
	source         string
}

// Failure is a chunk whose last fetch failed.
type Failure = chunkwait.Failure

// Content serves files' bytes from their chunks as they become local. One fetch of a chunk runs at a time, and every
// reader needing it waits for that one.
type Content struct {
	InvalidHold time.Duration // set before the content is shared

	life    context.Context // fetches run under it, not under a reader's: others may be waiting on them
	x       *filecas.Index
	packs   *packCache
	fetcher *fetch.Fetcher
	dec     *zstd.Decoder
	start   time.Time

	mu       sync.Mutex
	st       []chunkState
	local    int
	counts   counters
	demandAt time.Time // when a read last had to fetch (the start until one did): the sweep waits for quiet
	prefetch string
	complete chan struct{}
	changed  chan struct{}

	// decoded keeps the chunks reads decompressed last (up to decodedBudget bytes, the oldest dropped first): the
	// kernel reads a file in requests of at most 1 MiB, and a chunk of up to 8 MiB is decompressed once, not per request.
	decMu       sync.Mutex
	decoded     map[int][]byte
	decodedFIFO []int
	decodedSize int64
}

const decodedBudget = 64 << 20

type counters struct {
	cached, onDemand, ahead, read                    int
	bytesLocal, bytesOnDemand, bytesAhead, bytesRead int64
	storedFetched                                    int64
	attempts, requests                               int
	firstReadMs, completeMs, readyMs                 int64
	failed                                           map[int]*Failure
}

// NewContent counts the chunks an earlier mount verified into the cache directory (packcache.go) as local. start is
// the zero of every *Ms figure; ending life abandons every running fetch.
func NewContent(life context.Context, x *filecas.Index, cacheDir string, f *fetch.Fetcher, start time.Time) (*Content, error) {
	packs, err := openPackCache(cacheDir)
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.IgnoreChecksum(true), // the chunk's SHA-256 is checked instead
		zstd.WithDecoderMaxMemory(uint64(filecas.DefaultLimits.MaxChunk)))
	if err != nil {
		return nil, err
	}
	ct := &Content{InvalidHold: DefaultInvalidHold, life: life, x: x, packs: packs, fetcher: f, dec: dec, start: start, demandAt: start,
		prefetch: "pending", complete: make(chan struct{}), changed: make(chan struct{}, 1), decoded: map[int][]byte{}}
	ct.st = make([]chunkState, len(x.Chunks))
	ct.counts = counters{firstReadMs: -1, completeMs: -1, readyMs: -1, failed: map[int]*Failure{}}
	verified := make([]map[int64]string, len(x.Packs))
	for i, p := range x.Packs {
		verified[i] = packs.verified(p.Name)
	}
	for i, ch := range x.Chunks {
		if verified[ch.Pack][ch.Offset] == ch.Sha256 {
			ct.st[i] = chunkState{Slot: chunkwait.Slot{Local: true}, source: FromCache}
			ct.local++
			ct.counts.cached++
			ct.counts.bytesLocal += ch.Size
		}
	}
	ct.checkComplete()
	return ct, nil
}

func (ct *Content) ms() int64 { return time.Since(ct.start).Milliseconds() }

// Complete is closed once every chunk is local.
func (ct *Content) Complete() <-chan struct{} { return ct.complete }

// MarkReady records when the mount first answered.
func (ct *Content) MarkReady() {
	ct.mu.Lock()
	ct.counts.readyMs = ct.ms()
	ct.mu.Unlock()
	ct.poke()
}

// segment: file bytes [off, off+n) are chunk's bytes from at.
type segment struct {
	off, n, at int64
	chunk      int
}

// Segments maps a file entry's data onto its chunks: its data regions (the whole file when it lists none) filled by
// its chunks in order. The index was validated: the chunks hold exactly the regions' bytes.
func Segments(x *filecas.Index, e *filecas.Entry) []segment {
	regions := e.Data
	if len(regions) == 0 && e.Size > 0 {
		regions = [][2]int64{{0, e.Size}}
	}
	segs := make([]segment, 0, len(e.Chunks)+len(regions))
	ci, at := 0, int64(0)
	for _, r := range regions {
		off, left := r[0], r[1]
		for left > 0 && ci < len(e.Chunks) {
			c := e.Chunks[ci]
			n := min(left, x.Chunks[c].Size-at)
			segs = append(segs, segment{off: off, n: n, at: at, chunk: c})
			off, left, at = off+n, left-n, at+n
			if at == x.Chunks[c].Size {
				ci, at = ci+1, 0
			}
		}
	}
	return segs
}

// ReadFile fills p with the file's bytes from off (size: the file's size); bytes no segment covers are a hole's zeros.
// It returns fewer bytes only at the end of the file, and an error wrapping ErrUnavailable when a chunk under the range
// cannot be fetched and verified: then no byte is returned.
func (ct *Content) ReadFile(ctx context.Context, segs []segment, size int64, p []byte, off int64) (int, error) {
	if off >= size {
		return 0, nil
	}
	end := min(off+int64(len(p)), size)
	p = p[:end-off]
	ct.noteFirstRead()
	first := sort.Search(len(segs), func(i int) bool { return segs[i].off+segs[i].n > off })
	last := first
	for ; last < len(segs) && segs[last].off < end; last++ {
		if !ct.isLocal(segs[last].chunk) {
			ct.readAhead(segs, last+1)
		}
		if err := ct.ensure(ctx, segs[last].chunk, OnDemand); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	clear(p)
	for _, s := range segs[first:last] {
		from, to := max(off, s.off), min(end, s.off+s.n)
		data, err := ct.chunkBytes(s.chunk)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		copy(p[from-off:to-off], data[s.at+from-s.off:])
		ct.noteRead(s.chunk)
	}
	return len(p), nil
}

// chunkBytes is local chunk c's bytes: decompressed lately, or its frame read from the pack cache and decompressed.
// The frame was verified when it was logged, so it is not hashed again (as a chunk file in the image mount's cache
// is trusted once renamed into place).
func (ct *Content) chunkBytes(c int) ([]byte, error) {
	ct.decMu.Lock()
	data, ok := ct.decoded[c]
	ct.decMu.Unlock()
	if ok {
		return data, nil
	}
	ch := ct.x.Chunks[c]
	frame, err := ct.packs.read(ct.x.Packs[ch.Pack].Name, ch.Offset, ch.Stored, nil)
	if err != nil {
		return nil, err
	}
	data, err = ct.dec.DecodeAll(frame, make([]byte, 0, ch.Size))
	if err != nil || int64(len(data)) != ch.Size {
		return nil, fmt.Errorf("chunk %s: the cached frame does not decompress to its size: %v", ch.Sha256, err)
	}
	ct.keepDecoded(c, data)
	return data, nil
}

func (ct *Content) keepDecoded(c int, data []byte) {
	ct.decMu.Lock()
	defer ct.decMu.Unlock()
	if _, ok := ct.decoded[c]; ok {
		return
	}
	ct.decoded[c] = data
	ct.decodedFIFO = append(ct.decodedFIFO, c)
	ct.decodedSize += int64(len(data))
	for ct.decodedSize > decodedBudget && len(ct.decodedFIFO) > 1 {
		old := ct.decodedFIFO[0]
		ct.decodedFIFO = ct.decodedFIFO[1:]
		ct.decodedSize -= int64(len(ct.decoded[old]))
		delete(ct.decoded, old)
	}
}

// readAhead starts fetches of the file's next chunks (from segment i) that are neither local nor on their way: a
// read that had to fetch is most likely the start of reading the file through, and its chunks then arrive together
// rather than one round trip after another (the image mount queues an on-demand chunk's neighbours the same way).
func (ct *Content) readAhead(segs []segment, i int) {
	for end := min(i+readAheadChunks, len(segs)); i < end; i++ {
		c := segs[i].chunk
		ct.mu.Lock()
		start := ct.st[c].Startable()
		if start {
			ct.st[c].Inflight = make(chan struct{})
		}
		ct.mu.Unlock()
		if start {
			go ct.fetchOne(c, OnDemand)
		}
	}
}

// readAheadChunks: how many of a file's next chunks a read that had to fetch starts fetching too.
const readAheadChunks = 4

func (ct *Content) isLocal(c int) bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.st[c].Local
}

func (ct *Content) noteFirstRead() {
	ct.mu.Lock()
	if ct.counts.firstReadMs < 0 {
		ct.counts.firstReadMs = ct.ms()
	}
	ct.mu.Unlock()
}

func (ct *Content) noteRead(c int) {
	ct.mu.Lock()
	if s := &ct.st[c]; !s.read {
		s.read = true
		ct.counts.read++
		ct.counts.bytesRead += ct.x.Chunks[c].Size
	}
	ct.mu.Unlock()
}

// ensure makes chunk c local: at once when it is, by waiting when a fetch of it runs, else by fetching it. ctx
// bounds only the wait. An on-demand caller whose wait ended in someone else's failure (a prefetch group's) starts
// one fetch of its own, so a read never fails only because the prefetcher gave up.
func (ct *Content) ensure(ctx context.Context, c int, source string) error {
	return chunkwait.Ensure(ctx, &ct.mu, &ct.st[c].Slot, source == OnDemand, ct.InvalidHold, func() {
		if source == OnDemand {
			ct.demandAt = time.Now()
		}
		go ct.fetchOne(c, source)
	})
}

// fetchOne fetches chunk c alone: a Range GET of its frame (the caller set its inflight).
func (ct *Content) fetchOne(c int, source string) {
	ch := ct.x.Chunks[c]
	var stored []byte
	attempts, err := ct.fetcher.Range(ct.life, ct.x.Packs[ch.Pack].Name, ch.Offset, ch.Stored, func(r io.Reader) error {
		ct.countRequest()
		var err error
		stored, err = readStored(r, ch.Stored, stored)
		if err != nil {
			return err
		}
		data, err := ct.verify(c, stored)
		if err == nil && source == OnDemand {
			ct.keepDecoded(c, data) // the read that asked for it copies from it next
		}
		return err
	})
	ct.settle(c, source, attempts, err)
}

func (ct *Content) countRequest() {
	ct.mu.Lock()
	ct.counts.requests++
	ct.mu.Unlock()
}

func readStored(r io.Reader, n int64, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// verify decompresses chunk c's frame, checks its size and SHA-256 against the index and only then caches the frame
// (packcache.go); it returns the chunk's bytes.
func (ct *Content) verify(c int, stored []byte) ([]byte, error) {
	ch := ct.x.Chunks[c]
	data, err := ct.dec.DecodeAll(stored, make([]byte, 0, ch.Size))
	if err != nil {
		return nil, &fetch.ChunkInvalid{SHA256: ch.Sha256, Got: "an undecodable frame (" + err.Error() + ")", Size: int64(len(data))}
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != ch.Sha256 || int64(len(data)) != ch.Size {
		return nil, &fetch.ChunkInvalid{SHA256: ch.Sha256, Got: got, Size: int64(len(data))}
	}
	if err := ct.packs.put(ct.x.Packs[ch.Pack].Name, ch.Offset, stored, []string{logLine(ch.Offset, ch.Sha256)}); err != nil {
		return nil, fmt.Errorf("chunk %s: cache: %w", ch.Sha256, err)
	}
	ct.mu.Lock()
	ct.counts.storedFetched += ch.Stored
	ct.mu.Unlock()
	return data, nil
}

// settle records the end of a fetch of chunk c (err nil: it is in the cache) and wakes its waiters.
func (ct *Content) settle(c int, source string, attempts int, err error) {
	ch := ct.x.Chunks[c]
	ct.mu.Lock()
	s := &ct.st[c]
	ct.counts.attempts += attempts
	if err == nil {
		s.source = source
		s.End(nil, false)
		ct.local++
		ct.counts.bytesLocal += ch.Size
		delete(ct.counts.failed, c)
		if source == OnDemand {
			ct.counts.onDemand++
			ct.counts.bytesOnDemand += ch.Size
		} else {
			ct.counts.ahead++
			ct.counts.bytesAhead += ch.Size
		}
	} else {
		f := &Failure{Index: c, SHA256: ch.Sha256, Reason: err.Error(), Attempts: attempts, AtMs: ct.ms()}
		var invalid *fetch.ChunkInvalid
		// A prefetch group's bad frame was not retried: not held.
		s.End(f, errors.As(err, &invalid) && attempts > 0)
		ct.counts.failed[c] = f
	}
	ct.checkComplete()
	ct.mu.Unlock()
	ct.poke()
}

// checkComplete closes complete once every chunk is local; called with mu held (or before sharing).
func (ct *Content) checkComplete() {
	if ct.local == len(ct.st) && ct.counts.completeMs < 0 {
		ct.counts.completeMs = ct.ms()
		close(ct.complete)
	}
}

func (ct *Content) poke() {
	select {
	case ct.changed <- struct{}{}:
	default:
	}
}

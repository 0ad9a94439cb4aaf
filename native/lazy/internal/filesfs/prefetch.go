package filesfs

import (
	"context"
	"fmt"
	"io"
	"time"
)

// PrefetchOptions tunes the background fetcher.
type PrefetchOptions struct {
	Workers int // parallel Range GETs; 0 disables prefetching
	// GroupBytes: neighbouring frames of one pack are fetched by one Range GET up to this many bytes (a gap of at most
	// GapBytes between two frames is read and dropped rather than cut the GET in two).
	GroupBytes, GapBytes int64
	// Quiet: the sweep waits until reads have had to fetch nothing for this long (counted from the start too), so a
	// workspace's first use has the store and the CPU to itself, as the image mount's sweep does; never longer than
	// QuietAtMost after the start (0: no bound).
	Quiet, QuietAtMost time.Duration
	Passes             int           // sweeps; later ones fetch each chunk still missing alone, with its retries
	RetryPause         time.Duration // pause before such a sweep
}

// group is a run of chunks (indexes, in index order) whose frames lie close together in one pack.
type group struct {
	pack   int
	chunks []int
}

// Groups cuts the index's chunks, in index order, into runs of one pack whose frames follow each other with gaps of
// at most gap bytes and span at most most bytes (a chunk larger than that is a group of its own).
func (ct *Content) Groups(most, gap int64) []group {
	var gs []group
	for i, ch := range ct.x.Chunks {
		if n := len(gs); n > 0 {
			g := &gs[n-1]
			first, last := ct.x.Chunks[g.chunks[0]], ct.x.Chunks[g.chunks[len(g.chunks)-1]]
			end := last.Offset + last.Stored
			if ch.Pack == g.pack && ch.Offset >= end && ch.Offset-end <= gap && ch.Offset+ch.Stored-first.Offset <= most {
				g.chunks = append(g.chunks, i)
				continue
			}
		}
		gs = append(gs, group{pack: ch.Pack, chunks: []int{i}})
	}
	return gs
}

// Prefetch fetches every chunk not yet local until all are, ctx ends or the passes are spent: first one sweep of
// grouped Range GETs in index order (after reads have been quiet), then passes fetching each chunk still missing alone.
func (ct *Content) Prefetch(ctx context.Context, o PrefetchOptions) {
	if o.Workers <= 0 {
		ct.setPrefetch("off")
		return
	}
	ct.setPrefetch("running")
	defer ct.setPrefetch("done")
	if o.Passes <= 0 {
		o.Passes = 3
	}
	groups := ct.Groups(o.GroupBytes, o.GapBytes)
	next := make(chan group)
	go func() {
		defer close(next)
		for _, g := range groups {
			for wait := ct.quietLeft(o); wait > 0; wait = ct.quietLeft(o) {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return
				}
			}
			select {
			case next <- g:
			case <-ctx.Done():
				return
			}
		}
	}()
	ct.workers(o.Workers, func() {
		for g := range next {
			ct.fetchGroup(g)
		}
	})
	for pass := 1; pass < o.Passes; pass++ {
		select {
		case <-ct.complete:
			return
		case <-ctx.Done():
			return
		case <-time.After(o.RetryPause):
		}
		missing := make(chan int)
		go func() {
			defer close(missing)
			for c := range ct.st {
				select {
				case missing <- c:
				case <-ctx.Done():
					return
				}
			}
		}()
		ct.workers(o.Workers, func() {
			for c := range missing {
				_ = ct.ensure(ctx, c, Ahead)
			}
		})
	}
}

func (ct *Content) workers(n int, work func()) {
	done := make(chan struct{}, n)
	for w := 0; w < n; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			work()
		}()
	}
	for w := 0; w < n; w++ {
		<-done
	}
}

// quietLeft is how much longer the sweep stands back for reads.
func (ct *Content) quietLeft(o PrefetchOptions) time.Duration {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	left := o.Quiet - time.Since(ct.demandAt)
	if o.QuietAtMost > 0 {
		left = min(left, o.QuietAtMost-time.Since(ct.start))
	}
	return left
}

// fetchGroup claims the group's chunks that are neither local nor being fetched, and fetches them with one Range GET
// from the first claimed frame to the last: each frame is verified and cached as it arrives, so a reader waiting for
// it is served before the GET ends. A frame that fails its check is reported (a read or a later pass fetches it alone,
// with retries); a broken GET is retried for the frames it had not delivered.
func (ct *Content) fetchGroup(g group) {
	ct.mu.Lock()
	var mine []int
	for _, c := range g.chunks {
		if s := &ct.st[c]; s.Startable() {
			s.Inflight = make(chan struct{})
			mine = append(mine, c)
		}
	}
	ct.mu.Unlock()
	if len(mine) == 0 {
		return
	}
	first, last := ct.x.Chunks[mine[0]], ct.x.Chunks[mine[len(mine)-1]]
	from, to := first.Offset, last.Offset+last.Stored
	done := make(map[int]bool, len(mine))
	var buf []byte
	attempts, err := ct.fetcher.Range(ct.life, ct.x.Packs[g.pack].Name, from, to-from, func(r io.Reader) error {
		ct.countRequest()
		at := from
		for _, c := range mine {
			ch := ct.x.Chunks[c]
			if _, err := io.CopyN(io.Discard, r, ch.Offset-at); err != nil {
				return err
			}
			var err error
			if buf, err = readStored(r, ch.Stored, buf); err != nil {
				return err
			}
			at = ch.Offset + ch.Stored
			if done[c] {
				continue // delivered by an earlier attempt
			}
			done[c] = true
			_, err = ct.verify(c, buf)
			ct.settle(c, Ahead, 0, err)
		}
		return nil
	})
	for _, c := range mine {
		if !done[c] {
			ct.settle(c, Ahead, attempts, fmt.Errorf("chunk %s: %w", ct.x.Chunks[c].Sha256, err))
		}
	}
	ct.mu.Lock()
	ct.counts.attempts += attempts
	ct.mu.Unlock()
}

func (ct *Content) setPrefetch(state string) {
	ct.mu.Lock()
	ct.prefetch = state
	ct.mu.Unlock()
	ct.poke()
}

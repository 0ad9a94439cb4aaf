package lazyimage

import (
	"context"
	"time"
)

// PrefetchOptions tunes the background fetcher.
type PrefetchOptions struct {
	Workers    int           // parallel fetches; 0 disables prefetching
	Passes     int           // sweeps over the chunk list; later passes retry what failed
	RetryPause time.Duration // pause before a pass that retries failures
	// Quiet: the sweep in image order waits until this long has passed since the mount started and since a read last
	// had to fetch a chunk; the chunks reads suggest (the tables, the neighbours of what they read) go at once. The
	// reads a workspace's first use makes then have the store and the CPU to themselves.
	Quiet time.Duration
	// QuietAtMost bounds that waiting, counted from the mount's start: a workload that keeps reading new chunks
	// must not keep the image from completing (the restore waits for it). 0: no bound.
	QuietAtMost time.Duration
}

// Prefetch fetches every chunk not yet local until the image is complete, ctx ends, or the passes are spent. Order:
// the first chunk, then a squashfs image's tables (queueTables); chunks after the ones reads touched (the latest read
// first: squashfs stores a directory's files next to each other), then, once reads have been quiet for o.Quiet, the
// rest in image order. Failures are recorded in the status and retried in the next pass.
//
// The status's "prefetch" field says when it has ended ("done"): a chunk still failed then will only be tried again by
// a read that needs it, so whoever waits for completion (the agent) can stop waiting and report the chunk.
func (img *Image) Prefetch(ctx context.Context, o PrefetchOptions) {
	if o.Workers <= 0 {
		img.setPrefetch("off")
		return
	}
	img.setPrefetch("running")
	defer img.setPrefetch("done")
	if o.Passes <= 0 {
		o.Passes = 3
	}
	img.queueTables(ctx)
	for pass := 0; pass < o.Passes; pass++ {
		if pass > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(o.RetryPause):
			}
		}
		cursor := 0
		// next is a chunk to fetch; or, while reads are not yet quiet, how long to wait (or until hints come).
		next := func() (d int, ok bool, wait time.Duration, hinted <-chan struct{}) {
			img.mu.Lock()
			defer img.mu.Unlock()
			for len(img.hints) > 0 {
				d := img.hints[len(img.hints)-1]
				img.hints = img.hints[:len(img.hints)-1]
				if img.st[d].Startable() {
					return d, true, 0, nil
				}
			}
			if quiet := img.quietLeft(o); quiet > 0 {
				return 0, false, quiet, img.hinted
			}
			for ; cursor < len(img.st); cursor++ {
				if img.st[cursor].Startable() {
					cursor++
					return cursor - 1, true, 0, nil
				}
			}
			return 0, false, 0, nil
		}
		done := make(chan struct{}, o.Workers)
		for w := 0; w < o.Workers; w++ {
			go func() {
				defer func() { done <- struct{}{} }()
				for ctx.Err() == nil {
					d, ok, wait, hinted := next()
					if wait > 0 {
						select {
						case <-time.After(wait):
						case <-hinted:
						case <-ctx.Done():
						}
						continue
					}
					if !ok {
						return
					}
					_ = img.ensure(ctx, d, Ahead)
				}
			}()
		}
		for w := 0; w < o.Workers; w++ {
			<-done
		}
		select {
		case <-img.complete:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (img *Image) setPrefetch(state string) {
	img.mu.Lock()
	img.prefetch = state
	img.mu.Unlock()
	img.poke()
}

// quietLeft is how much longer the sweep stands back (called with mu held): until reads have been quiet for o.Quiet,
// but never past o.QuietAtMost after the start.
func (img *Image) quietLeft(o PrefetchOptions) time.Duration {
	left := o.Quiet - time.Since(img.demandAt)
	if o.QuietAtMost > 0 {
		left = min(left, o.QuietAtMost-time.Since(img.start))
	}
	return left
}

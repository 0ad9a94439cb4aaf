// Package chunkwait is the per-chunk fetch state both lazy mounts keep (lazyimage: the chunks of an image; filesfs:
// the frames of files' chunks in packs): one fetch of a chunk runs at a time and everyone needing the chunk waits
// for it; a chunk whose bytes just failed their SHA-256 after every retry fails the on-demand reads that need it at
// once for a while (the hold), instead of each read fetching it again.
package chunkwait

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Failure is a chunk whose last fetch failed, as a mount's status reports it.
type Failure struct {
	Index    int    `json:"index"`
	SHA256   string `json:"sha256"`
	Reason   string `json:"reason"`
	Attempts int    `json:"attempts"`
	AtMs     int64  `json:"atMs"`
}

// Slot is one chunk's fetch state, guarded by its owner's mutex.
type Slot struct {
	Local     bool
	Inflight  chan struct{} // closed when the running fetch ends
	Failure   *Failure
	InvalidAt time.Time // when a fetch last got bytes that did not hash to the chunk's name (zero: never)
}

// Ensure makes the slot's chunk local: at once when it is, by waiting when a fetch of it runs, else by starting one
// (start runs with mu held, after Ensure has set Inflight, and must launch the fetch, which ends it with End). ctx
// bounds only the wait. An on-demand caller whose wait ended in someone else's failure (the prefetcher's) starts one
// fetch of its own, so a read never fails only because the prefetcher gave up.
func Ensure(ctx context.Context, mu *sync.Mutex, slot *Slot, onDemand bool, hold time.Duration, start func()) error {
	started := false
	for {
		mu.Lock()
		if slot.Local {
			mu.Unlock()
			return nil
		}
		if slot.Inflight == nil && onDemand && !started && !slot.InvalidAt.IsZero() && time.Since(slot.InvalidAt) < hold {
			reason := slot.Failure.Reason
			mu.Unlock()
			return errors.New(reason)
		}
		if slot.Inflight == nil {
			slot.Inflight = make(chan struct{})
			started = true
			start()
		}
		wait := slot.Inflight
		mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
		mu.Lock()
		local, failure := slot.Local, slot.Failure
		mu.Unlock()
		if local {
			return nil
		}
		if started || !onDemand {
			return errors.New(failure.Reason)
		}
	}
}

// End records the end of the slot's fetch (f nil: the chunk is local; held: its bytes failed their SHA-256, so
// on-demand reads fail at once for a while) and wakes its waiters. Called with the owner's mutex held.
func (s *Slot) End(f *Failure, held bool) {
	if f == nil {
		s.Local, s.Failure = true, nil
	} else {
		s.Failure = f
		if held {
			s.InvalidAt = time.Now()
		}
	}
	if s.Inflight != nil {
		close(s.Inflight)
		s.Inflight = nil
	}
}

// Startable: neither local nor being fetched (the prefetcher's and the read-ahead's test). Called with mu held.
func (s *Slot) Startable() bool { return !s.Local && s.Inflight == nil }

package chunkwait

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fetcher ends each fetch it is started for after `after`, with `fail` (nil: the chunk becomes local), or with the
// next of `outcomes` while any are left.
type fetcher struct {
	mu       sync.Mutex
	slot     Slot
	starts   atomic.Int32
	after    time.Duration
	fail     *Failure
	outcomes []*Failure
	held     bool
}

// start runs with mu held (Ensure's contract): the outcome is chosen now, for this fetch.
func (f *fetcher) start() {
	f.starts.Add(1)
	outcome := f.fail
	if len(f.outcomes) > 0 {
		outcome, f.outcomes = f.outcomes[0], f.outcomes[1:]
	}
	go func() {
		time.Sleep(f.after)
		f.mu.Lock()
		f.slot.End(outcome, f.held)
		f.mu.Unlock()
	}()
}

func (f *fetcher) ensure(ctx context.Context, onDemand bool) error {
	return Ensure(ctx, &f.mu, &f.slot, onDemand, time.Minute, f.start)
}

func TestOneFetchServesEveryWaiter(t *testing.T) {
	f := &fetcher{after: 20 * time.Millisecond}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- f.ensure(context.Background(), true) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.starts.Load(); n != 1 {
		t.Fatalf("%d fetches started for 8 waiters, want 1", n)
	}
	if err := f.ensure(context.Background(), true); err != nil || f.starts.Load() != 1 {
		t.Fatalf("a local chunk: err %v, %d fetches", err, f.starts.Load())
	}
}

func TestAHeldChunkFailsOnDemandReadsAtOnceButNotThePrefetcher(t *testing.T) {
	f := &fetcher{fail: &Failure{Reason: "sha256 mismatch"}, held: true}
	if err := f.ensure(context.Background(), true); err == nil || err.Error() != "sha256 mismatch" {
		t.Fatalf("first read: %v", err)
	}
	// Within the hold: failed at once, no fetch.
	if err := f.ensure(context.Background(), true); err == nil || f.starts.Load() != 1 {
		t.Fatalf("held read: err %v, %d fetches (want 1)", err, f.starts.Load())
	}
	// The prefetcher is not held: it fetches again.
	_ = f.ensure(context.Background(), false)
	if f.starts.Load() != 2 {
		t.Fatalf("prefetch of a held chunk: %d fetches, want 2", f.starts.Load())
	}
	// A failure that is not held (the store did not answer): the next read fetches again.
	g := &fetcher{fail: &Failure{Reason: "timeout"}}
	_ = g.ensure(context.Background(), true)
	_ = g.ensure(context.Background(), true)
	if g.starts.Load() != 2 {
		t.Fatalf("unheld failure: %d fetches, want 2", g.starts.Load())
	}
}

func TestAReadWhoseWaitEndsInTheFetchersFailureFetchesOnce(t *testing.T) {
	// The prefetcher's fetch fails (not held); the read's own, started once it saw that, succeeds.
	f := &fetcher{after: 30 * time.Millisecond, outcomes: []*Failure{{Reason: "gave up"}, nil}}
	prefetch := make(chan error, 1)
	go func() { prefetch <- f.ensure(context.Background(), false) }()
	for f.starts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := f.ensure(context.Background(), true); err != nil {
		t.Fatalf("the read after the prefetcher's failure: %v", err)
	}
	if n := f.starts.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (the prefetcher's, then the read's own)", n)
	}
	if err := <-prefetch; err == nil {
		t.Fatal("the prefetcher's own failure was not reported to it")
	}
}

func TestTheContextBoundsOnlyTheWait(t *testing.T) {
	f := &fetcher{after: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := f.ensure(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
	// The fetch went on: a later read finds it done.
	if err := f.ensure(context.Background(), true); err != nil || f.starts.Load() != 1 {
		t.Fatalf("after the wait was cut: err %v, %d fetches (want 1)", err, f.starts.Load())
	}
}

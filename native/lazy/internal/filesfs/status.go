package filesfs

import (
	"context"
	"sort"
	"time"

	"snapflow/native/lazy/internal/lazyimage"
)

// Status is what status.json holds, shaped as the image mount's (lazyimage.Status) where the two mean the same:
// state, prefetch, the *Ms times (since the mount started; -1: not yet), chunks, bytes, failed.
type Status struct {
	Version     int       `json:"version"`
	Kind        string    `json:"kind"`     // "files": a file-level index's tree
	State       string    `json:"state"`    // "mounting", "ready", "complete", "stopped"
	Prefetch    string    `json:"prefetch"` // "pending", "running", "done", "off"
	Entries     int       `json:"entries"`
	StartedAt   time.Time `json:"startedAt"`
	ReadyMs     int64     `json:"readyMs"`
	FirstReadMs int64     `json:"firstReadMs"`
	CompleteMs  int64     `json:"completeMs"`
	UpdatedMs   int64     `json:"updatedMs"`
	Chunks      struct {
		Total    int `json:"total"`
		Local    int `json:"local"`
		Cached   int `json:"cached"` // already in the cache at start
		OnDemand int `json:"onDemand"`
		Ahead    int `json:"ahead"`
		Failed   int `json:"failed"`
		Read     int `json:"read"`
	} `json:"chunks"`
	Bytes struct {
		Total    int64 `json:"total"` // the chunks' decompressed bytes
		Local    int64 `json:"local"`
		Fetched  int64 `json:"fetched"`
		Stored   int64 `json:"stored"` // the frames' bytes fetched (what crossed the network, gaps aside)
		OnDemand int64 `json:"onDemand"`
		Ahead    int64 `json:"ahead"`
		Read     int64 `json:"read"`
	} `json:"bytes"`
	FetchAttempts int       `json:"fetchAttempts"`
	Requests      int       `json:"requests"` // Range GETs sent
	Failed        []Failure `json:"failed"`
}

// Snapshot returns the current status; state is the caller's lifecycle word, "complete" once every chunk is local.
func (ct *Content) Snapshot(state string) Status {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	var s Status
	s.Version, s.Kind, s.State, s.Prefetch = 1, "files", state, ct.prefetch
	if ct.counts.completeMs >= 0 && state == "ready" {
		s.State = "complete"
	}
	s.Entries, s.StartedAt = len(ct.x.Entries), ct.start.UTC()
	s.ReadyMs, s.FirstReadMs, s.CompleteMs, s.UpdatedMs = ct.counts.readyMs, ct.counts.firstReadMs, ct.counts.completeMs, ct.ms()
	s.Chunks.Total, s.Chunks.Local, s.Chunks.Cached = len(ct.st), ct.local, ct.counts.cached
	s.Chunks.OnDemand, s.Chunks.Ahead, s.Chunks.Failed, s.Chunks.Read = ct.counts.onDemand, ct.counts.ahead, len(ct.counts.failed), ct.counts.read
	for _, ch := range ct.x.Chunks {
		s.Bytes.Total += ch.Size
	}
	s.Bytes.Local, s.Bytes.OnDemand, s.Bytes.Ahead, s.Bytes.Read = ct.counts.bytesLocal, ct.counts.bytesOnDemand, ct.counts.bytesAhead, ct.counts.bytesRead
	s.Bytes.Fetched, s.Bytes.Stored = s.Bytes.OnDemand+s.Bytes.Ahead, ct.counts.storedFetched
	s.FetchAttempts, s.Requests = ct.counts.attempts, ct.counts.requests
	s.Failed = []Failure{}
	for _, f := range ct.counts.failed {
		s.Failed = append(s.Failed, *f)
	}
	sort.Slice(s.Failed, func(i, j int) bool { return s.Failed[i].Index < s.Failed[j].Index })
	return s
}

// KeepStatus rewrites path whenever something changed, at most every interval, until ctx ends.
func (ct *Content) KeepStatus(ctx context.Context, path string, interval time.Duration, state func() string) {
	lazyimage.KeepWriting(ctx, path, interval, ct.changed, func() any { return ct.Snapshot(state()) })
}

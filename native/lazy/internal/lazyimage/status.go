package lazyimage

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Status is what status.json holds: the restore record's source for usable/complete times and for which chunks were
// fetched on demand versus ahead. Times are milliseconds since the mount started; -1 means "not yet".
type Status struct {
	Version     int       `json:"version"`
	State       string    `json:"state"`    // "mounting", "ready", "complete", "stopped"
	Prefetch    string    `json:"prefetch"` // "pending", "running", "done" (passes spent or complete), "off"
	ImageSHA256 string    `json:"imageSha256"`
	Size        int64     `json:"size"`
	StartedAt   time.Time `json:"startedAt"`
	ReadyMs     int64     `json:"readyMs"`
	FirstReadMs int64     `json:"firstReadMs"`
	CompleteMs  int64     `json:"completeMs"`
	UpdatedMs   int64     `json:"updatedMs"`
	Chunks      struct {
		Index    int `json:"index"` // entries in the index (a repeated chunk counts each time)
		Total    int `json:"total"` // distinct chunks
		Local    int `json:"local"`
		Cached   int `json:"cached"` // already in the cache at start
		OnDemand int `json:"onDemand"`
		Ahead    int `json:"ahead"`
		Failed   int `json:"failed"`
		Read     int `json:"read"` // read from by the mount so far (fetched on demand, ahead, or cached)
	} `json:"chunks"`
	Bytes struct {
		Total    int64 `json:"total"` // distinct bytes
		Local    int64 `json:"local"`
		Fetched  int64 `json:"fetched"`
		OnDemand int64 `json:"onDemand"`
		Ahead    int64 `json:"ahead"`
		Read     int64 `json:"read"` // the distinct chunks read from: what the mount's readers needed so far
	} `json:"bytes"`
	FetchAttempts  int       `json:"fetchAttempts"`
	OnDemandChunks []Fetched `json:"onDemandChunks"`
	Failed         []Failure `json:"failed"`
}

// Snapshot returns the current status; state is the caller's lifecycle word, replaced by "complete" once it is.
func (img *Image) Snapshot(state string) Status {
	img.mu.Lock()
	defer img.mu.Unlock()
	var s Status
	s.Version = 1
	s.State = state
	s.Prefetch = img.prefetch
	if img.counts.completeMs >= 0 && state == "ready" {
		s.State = "complete"
	}
	s.ImageSHA256, s.Size, s.StartedAt = img.idx.SHA256, img.idx.Size, img.start.UTC()
	s.ReadyMs, s.FirstReadMs, s.CompleteMs, s.UpdatedMs = img.counts.readyMs, img.counts.firstReadMs, img.counts.completeMs, img.ms()
	s.Chunks.Index, s.Chunks.Total, s.Chunks.Local = len(img.idx.Chunks), len(img.distinct), img.local
	s.Chunks.Cached, s.Chunks.OnDemand, s.Chunks.Ahead, s.Chunks.Failed, s.Chunks.Read = img.counts.cached, img.counts.onDemand, img.counts.ahead, len(img.counts.failed), img.counts.read
	for _, ch := range img.distinct {
		s.Bytes.Total += ch.Size
	}
	s.Bytes.Local, s.Bytes.OnDemand, s.Bytes.Ahead, s.Bytes.Read = img.counts.bytesLocal, img.counts.bytesOnDemand, img.counts.bytesAhead, img.counts.bytesRead
	s.Bytes.Fetched = s.Bytes.OnDemand + s.Bytes.Ahead
	s.FetchAttempts = img.counts.attempts
	s.OnDemandChunks = append([]Fetched{}, img.counts.onDemandList...)
	s.Failed = []Failure{}
	for _, f := range img.counts.failed {
		s.Failed = append(s.Failed, *f)
	}
	sort.Slice(s.Failed, func(i, j int) bool { return s.Failed[i].Index < s.Failed[j].Index })
	return s
}

// WriteStatus writes a status (this package's, or the files mount's) atomically (temporary file + rename), so a reader never sees half a file.
func WriteStatus(path string, s any) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".status-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// KeepStatus rewrites path whenever the state changed, at most every interval, until ctx ends. state() gives the
// lifecycle word at each write.
func (img *Image) KeepStatus(ctx context.Context, path string, interval time.Duration, state func() string) {
	KeepWriting(ctx, path, interval, img.changed, func() any { return img.Snapshot(state()) })
}

// KeepWriting rewrites path with snapshot() whenever changed fires, at most every interval (bursts of chunk
// completions coalesce into one write), until ctx ends: the status file of every lazy mount, image or file tree.
func KeepWriting(ctx context.Context, path string, interval time.Duration, changed <-chan struct{}, snapshot func() any) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	dirty := true
	for {
		if dirty {
			_ = WriteStatus(path, snapshot())
			dirty = false
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			dirty = true
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}
}

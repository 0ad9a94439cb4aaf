// Package urlfile reads the agent's presigned-URL file, {"<sha256>":"<url>",…}. URLs live in a file, not on a command
// line, so they never show in ps or logs, and the agent can rewrite the file with fresh URLs when they expire.
//
// The file may start with only some of the URLs: while a sibling "<file>.more" exists, the agent is still adding
// them (a lazy restore mounts before the Worker has signed every chunk's URL), so a chunk without one waits for it
// (Await) instead of failing.
package urlfile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// File holds the current URLs and reloads them from disk on request (after a 403, or while more are coming).
type File struct {
	path string
	mu   sync.RWMutex
	urls map[string]string
	// the file as last parsed: a reload that finds it unchanged parses nothing
	reload sync.Mutex
	seen   os.FileInfo
}

// MorePath is the marker the agent keeps while URLs are still being added.
func MorePath(path string) string { return path + ".more" }

// awaitPoll: how often a chunk without a URL looks again while more are coming.
const awaitPoll = 20 * time.Millisecond

// Await returns the chunk's URL, waiting while the agent is still adding URLs (the .more marker exists); false when
// none is known and none is coming, or ctx ended first.
func (f *File) Await(ctx context.Context, sha string) (string, bool) {
	for {
		if u, ok := f.URL(sha); ok {
			return u, true
		}
		_ = f.Reload()
		if u, ok := f.URL(sha); ok {
			return u, true
		}
		if _, err := os.Stat(MorePath(f.path)); err != nil {
			// The marker is removed after the last URLs were written: read once more, then it is final.
			_ = f.Reload()
			u, ok := f.URL(sha)
			return u, ok
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(awaitPoll):
		}
	}
}

// Open reads path once; a file that does not parse is an error at start, so the mount never starts half-configured.
func Open(path string) (*File, error) {
	f := &File{path: path}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Reload re-reads the file. A file caught mid-rewrite keeps the previous URLs and returns the error.
func (f *File) Reload() error {
	f.reload.Lock()
	defer f.reload.Unlock()
	info, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	// The agent replaces the file whole (rename): same size and time means the same file.
	if f.seen != nil && os.SameFile(info, f.seen) && info.ModTime().Equal(f.seen.ModTime()) && info.Size() == f.seen.Size() {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	var urls map[string]string
	if err := json.Unmarshal(b, &urls); err != nil {
		return fmt.Errorf("url file %s: %w", f.path, err)
	}
	f.mu.Lock()
	f.urls = urls
	f.mu.Unlock()
	f.seen = info
	return nil
}

// URL returns the URL for a chunk digest.
func (f *File) URL(sha string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	u, ok := f.urls[sha]
	return u, ok
}

// Len is the number of URLs currently known.
func (f *File) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.urls)
}

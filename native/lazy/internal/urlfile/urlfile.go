// Package urlfile reads the agent's presigned-URL file, {"<sha256>":"<url>",…}. URLs live in a file, not on a command
// line, so they never show in ps or logs, and the agent can rewrite the file with fresh URLs when they expire.
package urlfile

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// File holds the current URLs and reloads them from disk on request (after a 403).
type File struct {
	path string
	mu   sync.RWMutex
	urls map[string]string
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

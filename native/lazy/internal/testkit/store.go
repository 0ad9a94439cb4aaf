package testkit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"
)

// Store is a chunk store over real HTTP: GET (Range honoured)/PUT /chunks/<sha256>. Faults are set per chunk.
type Store struct {
	*httptest.Server
	mu       sync.Mutex
	chunks   map[string][]byte
	corrupt  map[string]bool
	missing  map[string]bool
	stalls   map[string]int // requests to hang before answering normally
	stallFor time.Duration
	token    string // when set, requests must carry ?token=<token>, else 403 (an expired presigned URL)
	gets     []string
	puts     int
}

// NewStore starts a store holding chunks (digest → bytes).
func NewStore(chunks map[string][]byte) *Store {
	s := &Store{chunks: chunks, corrupt: map[string]bool{}, missing: map[string]bool{}, stalls: map[string]int{}}
	if s.chunks == nil {
		s.chunks = map[string][]byte{}
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *Store) serve(w http.ResponseWriter, r *http.Request) {
	sha := strings.TrimPrefix(r.URL.Path, "/chunks/")
	s.mu.Lock()
	if s.token != "" && r.URL.Query().Get("token") != s.token {
		s.mu.Unlock()
		http.Error(w, "expired", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodPut {
		s.mu.Unlock()
		body := make([]byte, r.ContentLength)
		if _, err := readFull(r, body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.chunks[sha] = body
		s.puts++
		s.mu.Unlock()
		return
	}
	s.gets = append(s.gets, sha)
	stall := s.stalls[sha] > 0
	if stall {
		s.stalls[sha]--
	}
	data, ok := s.chunks[sha]
	missing, corrupt, stallFor := s.missing[sha], s.corrupt[sha], s.stallFor
	s.mu.Unlock()
	if stall {
		select { // hang like a stuck connection, but let the server close
		case <-time.After(stallFor):
		case <-r.Context().Done():
		}
		return
	}
	if !ok || missing {
		http.NotFound(w, r)
		return
	}
	if corrupt {
		data = append([]byte{}, data...)
		data[len(data)/2] ^= 0xff
	}
	http.ServeContent(w, r, sha, time.Time{}, bytes.NewReader(data)) // Range honoured, as the store's GETs are
}

func readFull(r *http.Request, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Body.Read(p[n:])
		n += m
		if err != nil {
			if n == len(p) {
				break
			}
			return n, err
		}
	}
	return n, nil
}

// Gets returns the digests requested so far, in order.
func (s *Store) Gets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.gets...)
}

// Corrupt, Missing and Stall set faults; Stall hangs the next n requests for sha for d each.
func (s *Store) Corrupt(sha string) { s.mu.Lock(); s.corrupt[sha] = true; s.mu.Unlock() }
func (s *Store) Missing(sha string) { s.mu.Lock(); s.missing[sha] = true; s.mu.Unlock() }
func (s *Store) Stall(sha string, n int, d time.Duration) {
	s.mu.Lock()
	s.stalls[sha], s.stallFor = n, d
	s.mu.Unlock()
}

// Heal removes every fault set for sha.
func (s *Store) Heal(sha string) {
	s.mu.Lock()
	delete(s.corrupt, sha)
	delete(s.missing, sha)
	delete(s.stalls, sha)
	s.mu.Unlock()
}

// RequireToken makes every URL without ?token=tok answer 403.
func (s *Store) RequireToken(tok string) { s.mu.Lock(); s.token = tok; s.mu.Unlock() }

// Has reports whether the store holds sha; Puts counts PUT requests.
func (s *Store) Has(sha string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.chunks[sha]
	return ok
}
func (s *Store) Puts() int { s.mu.Lock(); defer s.mu.Unlock(); return s.puts }

// WriteURLs writes a URL file for digests, with ?token=tok appended when tok is set.
func (s *Store) WriteURLs(path string, digests []string, tok string) error {
	urls := map[string]string{}
	for _, d := range digests {
		u := s.URL + "/chunks/" + d
		if tok != "" {
			u += "?token=" + tok
		}
		urls[d] = u
	}
	b, err := json.Marshal(urls)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

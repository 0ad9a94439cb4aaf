package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/filecas"
)

// filesCheckRequest is files-check's one stdin line (container/routes/files-check.ts): the snapshot's index (its
// chain beneath it), and whether only the names its own layer sets are checked.
type filesCheckRequest struct {
	Index       indexSource `json:"index"`
	LayerOnly   bool        `json:"layerOnly"`
	IdleSeconds int         `json:"idleSeconds"`
	Retries     int         `json:"retries"`
	// Limit: how many differences the answer names (all are counted)
	Limit int `json:"limit"`
}

type checkDifference struct {
	Path     string `json:"path"`
	Kind     string `json:"kind"`
	Field    string `json:"field,omitempty"`
	Expected any    `json:"expected,omitempty"`
	Actual   any    `json:"actual,omitempty"`
}

type filesCheckResult struct {
	Equal bool `json:"equal"`
	// Files and Bytes: what was hashed; Entries: the snapshot's index, composed
	Files       int               `json:"files"`
	Bytes       int64             `json:"bytes"`
	Entries     int               `json:"entries"`
	LayerOnly   bool              `json:"layerOnly"`
	Counts      map[string]int    `json:"counts"`
	Differences []checkDifference `json:"differences"`
	IndexMs     int64             `json:"indexMs"`
	Ms          int64             `json:"ms"`
}

// checkWorkers: files hashed at once. Through a lazy mount each read may wait for its chunks' fetch, so a few at
// once keep the store busy; four is the agent's deep check's order (HASH_AHEAD there reads 16 ahead in Node).
const checkWorkers = 4

// filesCheckCmd checks a file-level snapshot's content where its tree is: each regular file the index names (with
// layerOnly, each its own layer sets: what no check of the index beneath covered) opened beneath --root by
// descriptors that follow no symlink, hashed and compared with the index's size and SHA-256. Metadata is not
// compared: this is the content check of a tree served from the index itself (a file-level wake), whose entries are
// the index's. The answer (equal, the differences) or {"error": …} goes to --result-fd.
func filesCheckCmd(args []string) error {
	var req filesCheckRequest
	root, resultOut, answerError, err := rootedCommand("files-check", "the tree to check (a file-level wake's target)", args, &req)
	if err != nil {
		return err
	}
	if req.IdleSeconds <= 0 || req.Retries < 0 || req.Limit < 0 {
		return answerError(&filecas.Error{Code: "bad_request", Message: "stdin: idleSeconds must be positive, retries and limit not negative"})
	}
	if req.Limit == 0 {
		req.Limit = 20
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	started := time.Now()
	bodies, err := readIndexObjects(ctx, req.Index, req.Retries, time.Duration(req.IdleSeconds)*time.Second)
	if err != nil {
		return answerError(err)
	}
	x, _, err := filecas.DecodeChain(bodies, filecas.DefaultLimits)
	if err != nil {
		return answerError(err)
	}
	var only map[string]struct{}
	if req.LayerOnly {
		if only, err = filecas.LayerNames(bodies[len(bodies)-1], filecas.DefaultLimits); err != nil {
			return answerError(err)
		}
	}
	indexMs := time.Since(started).Milliseconds()
	rootFd, err := beneath.OpenRoot(root)
	if err != nil {
		return answerError(&filecas.Error{Code: "bad_request", Field: "root", Message: "root: " + err.Error()})
	}
	defer unix.Close(rootFd)
	res := checkFiles(ctx, rootFd, x, only, req.Limit)
	if err := ctx.Err(); err != nil {
		return answerError(err)
	}
	res.Entries, res.LayerOnly, res.IndexMs, res.Ms = len(x.Entries), req.LayerOnly, indexMs, time.Since(started).Milliseconds()
	return json.NewEncoder(resultOut).Encode(res)
}

// checkFiles hashes the index's regular files (first names: a hard link's content is its first name's), those in
// only when given, and answers what differs, sorted by path.
func checkFiles(ctx context.Context, root int, x *filecas.Index, only map[string]struct{}, limit int) filesCheckResult {
	res := filesCheckResult{Counts: map[string]int{"missing": 0, "changed": 0}, Differences: []checkDifference{}}
	var mu sync.Mutex
	var found []checkDifference
	jobs := make(chan *filecas.Entry)
	var wg sync.WaitGroup
	for range checkWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for e := range jobs {
				d, n := checkFile(root, e, buf)
				mu.Lock()
				res.Files++
				res.Bytes += n
				if d != nil {
					res.Counts[d.Kind]++
					found = append(found, *d)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range x.Entries {
		e := &x.Entries[i]
		if e.Type != "file" || e.Link != "" {
			continue
		}
		if _, listed := only[e.Path]; only != nil && !listed {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	sort.Slice(found, func(i, j int) bool { return found[i].Path < found[j].Path })
	res.Differences = append(res.Differences, found[:min(len(found), limit)]...)
	res.Equal = len(found) == 0
	return res
}

// checkFile opens e beneath root (no symlink followed, on the way or at its end) and compares its type, size and
// SHA-256 with the index's; it answers the difference, if any, and the bytes it read.
func checkFile(root int, e *filecas.Entry, buf []byte) (*checkDifference, int64) {
	fd, err := beneath.OpenFileBeneath(root, e.Path, unix.O_RDONLY, 0)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return &checkDifference{Path: e.Path, Kind: "missing"}, 0
	case errors.Is(err, unix.ELOOP):
		return &checkDifference{Path: e.Path, Kind: "changed", Field: "type", Expected: "file", Actual: "symlink"}, 0
	case err != nil:
		return &checkDifference{Path: e.Path, Kind: "changed", Field: "content", Expected: e.Sha256, Actual: err.Error()}, 0
	}
	f := os.NewFile(uintptr(fd), e.Path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &checkDifference{Path: e.Path, Kind: "changed", Field: "type", Expected: "file", Actual: "not a regular file"}, 0
	}
	if st.Size != e.Size {
		return &checkDifference{Path: e.Path, Kind: "changed", Field: "size", Expected: e.Size, Actual: st.Size}, 0
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.LimitReader(f, e.Size+1), buf)
	if err != nil {
		return &checkDifference{Path: e.Path, Kind: "changed", Field: "content", Expected: e.Sha256, Actual: err.Error()}, n
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != e.Size || got != e.Sha256 {
		return &checkDifference{Path: e.Path, Kind: "changed", Field: "sha256", Expected: e.Sha256, Actual: got}, n
	}
	return nil, n
}

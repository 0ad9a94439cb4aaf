// Package upload PUTs an image's chunks to their presigned URLs: N workers take chunks from a queue, read each from the
// image at its offset, check its SHA-256 again (the image must not have changed since it was indexed), and PUT it with
// retries. Only chunks present in the URL file are sent: the agent lists just the chunks the store lacks, which is
// what makes a fork upload only what changed.
package upload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"snapflow/native/lazy/internal/index"
	"snapflow/native/lazy/internal/urlfile"
)

// Options tunes an upload.
type Options struct {
	Concurrency int
	Retries     int
	Backoff     time.Duration
	Timeout     time.Duration // per attempt
	Client      *http.Client
}

// Result is printed as JSON by the CLI.
type Result struct {
	Chunks  int   `json:"chunks"`
	Bytes   int64 `json:"bytes"`
	Retries int   `json:"retries"`
	Ms      int64 `json:"ms"`
}

// Run uploads every distinct chunk of idx that has a URL in urls. It stops at the first chunk that fails all retries.
func Run(ctx context.Context, image string, idx *index.Index, urls *urlfile.File, o Options) (Result, error) {
	start := time.Now()
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Backoff == 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	f, err := os.Open(image)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()

	var todo []index.Chunk
	for _, c := range idx.Distinct() {
		if _, ok := urls.URL(c.SHA256); ok {
			todo = append(todo, c)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan index.Chunk)
	var (
		res      Result
		mu       sync.Mutex
		firstErr error
		retries  atomic.Int64
		wg       sync.WaitGroup
	)
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, idx.AvgChunk*4)
			for c := range queue {
				if int64(cap(buf)) < c.Size { // an index made with other parameters
					buf = make([]byte, c.Size)
				}
				buf = buf[:c.Size]
				err := readVerified(f, c, buf)
				if err == nil {
					var r int
					r, err = putWithRetries(ctx, urls, c.SHA256, buf, o)
					retries.Add(int64(r))
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				} else if err == nil {
					res.Chunks++
					res.Bytes += c.Size
				}
				mu.Unlock()
			}
		}()
	}
	for _, c := range todo {
		select {
		case queue <- c:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	res.Retries = int(retries.Load())
	res.Ms = time.Since(start).Milliseconds()
	return res, firstErr
}

func readVerified(f *os.File, c index.Chunk, buf []byte) error {
	if _, err := f.ReadAt(buf, c.Offset); err != nil {
		return fmt.Errorf("chunk %s: read image: %w", c.SHA256, err)
	}
	sum := sha256.Sum256(buf)
	if hex.EncodeToString(sum[:]) != c.SHA256 {
		return fmt.Errorf("chunk %s: image bytes at %d no longer match the index", c.SHA256, c.Offset)
	}
	return nil
}

// putWithRetries returns how many retries it took.
func putWithRetries(ctx context.Context, urls *urlfile.File, sha string, body []byte, o Options) (int, error) {
	backoff := o.Backoff
	for attempt := 0; ; attempt++ {
		err := put(ctx, urls, sha, body, o)
		if err == nil || attempt >= o.Retries || ctx.Err() != nil {
			return attempt, err
		}
		select {
		case <-ctx.Done():
			return attempt, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func put(ctx context.Context, urls *urlfile.File, sha string, body []byte, o Options) error {
	url, _ := urls.URL(sha)
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("chunk %s: %w", sha, err)
	}
	req.ContentLength = int64(len(body))
	resp, err := o.Client.Do(req)
	if err != nil {
		return fmt.Errorf("chunk %s: %w", sha, err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden {
		_ = urls.Reload() // expired URL: the agent may have written fresh ones
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("chunk %s: PUT answered %d", sha, resp.StatusCode)
	}
	return nil
}

// Package fetch downloads one chunk over its presigned GET URL and returns its bytes only once their SHA-256 matches the
// chunk's name. Each attempt has a deadline (a stalled store is abandoned, not waited on forever); failures are retried
// with backoff; a 403 re-reads the URL file first, because the agent renews expired URLs by rewriting it.
package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"

	"snapflow/native/lazy/internal/urlfile"
)

// Fetcher gets verified chunks. Zero values of the tuning fields take the defaults below.
type Fetcher struct {
	URLs    *urlfile.File
	Client  *http.Client
	Timeout time.Duration // per attempt, headers and body
	Retries int           // attempts after the first
	Backoff time.Duration // first pause; doubles each retry
}

const (
	defaultTimeout = 30 * time.Second
	defaultRetries = 4
	defaultBackoff = 200 * time.Millisecond
)

// Result describes a successful fetch.
type Result struct {
	Data     []byte
	Attempts int
}

// Get returns the chunk's bytes, verified against sha (hex) and size. The error of the last attempt is returned when all
// attempts fail; it is a *ChunkMissing or *ChunkInvalid when the cause is known.
func (f *Fetcher) Get(ctx context.Context, sha string, size int64) (Result, error) {
	var data []byte
	attempts, err := f.retry(ctx, func(ctx context.Context) (err error) {
		data, err = f.once(ctx, sha, size)
		return err
	})
	if err != nil {
		return Result{Attempts: attempts}, err
	}
	return Result{Data: data, Attempts: attempts}, nil
}

// retry runs attempt until it succeeds, fails permanently, or the retries are spent, pausing with backoff between
// attempts; it returns how many ran and the last error.
func (f *Fetcher) retry(ctx context.Context, attempt func(context.Context) error) (int, error) {
	retries, backoff := f.Retries, f.Backoff
	if retries == 0 {
		retries = defaultRetries
	}
	if retries < 0 {
		retries = 0
	}
	if backoff == 0 {
		backoff = defaultBackoff
	}
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return n, nil
		}
		if permanent(err) || n > retries || ctx.Err() != nil {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (f *Fetcher) once(ctx context.Context, sha string, size int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	body, err := f.open(ctx, sha, "", http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	// Read at most one byte more than expected, so an oversized body is caught without reading it all.
	var buf bytes.Buffer
	buf.Grow(int(size))
	if _, err := io.Copy(&buf, io.LimitReader(body, size+1)); err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sha, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(sum[:]); got != sha || int64(buf.Len()) != size {
		return nil, &ChunkInvalid{SHA256: sha, Got: got, Size: int64(buf.Len())}
	}
	return buf.Bytes(), nil
}

func (f *Fetcher) timeout() time.Duration {
	if f.Timeout == 0 {
		return defaultTimeout
	}
	return f.Timeout
}

// open GETs the object behind key's URL (with a Range header when rng is set) and returns its body when the store
// answered want; ctx bounds the whole attempt, body included.
func (f *Fetcher) open(ctx context.Context, key, rng string, want int) (io.ReadCloser, error) {
	// The agent may have added it since we last read the file, or may still be adding URLs.
	url, ok := f.URLs.Await(ctx, key)
	if !ok {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: no URL came within %s", key, f.timeout())
		}
		return nil, &ChunkMissing{SHA256: key, Why: "no URL in the url file"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if resp.StatusCode == want {
		return resp.Body, nil
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, &ChunkMissing{SHA256: key, Why: "store answered 404"}
	case http.StatusForbidden:
		// Most likely an expired URL: pick up whatever the agent wrote since, and let the retry use it.
		_ = f.URLs.Reload()
		return nil, fmt.Errorf("%s: store answered 403", key)
	}
	return nil, fmt.Errorf("%s: store answered %d", key, resp.StatusCode)
}

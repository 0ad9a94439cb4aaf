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
	var err error
	for attempt := 1; ; attempt++ {
		var data []byte
		data, err = f.once(ctx, sha, size)
		if err == nil {
			return Result{Data: data, Attempts: attempt}, nil
		}
		if permanent(err) || attempt > retries || ctx.Err() != nil {
			return Result{Attempts: attempt}, err
		}
		select {
		case <-ctx.Done():
			return Result{Attempts: attempt}, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (f *Fetcher) once(ctx context.Context, sha string, size int64) ([]byte, error) {
	timeout := f.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The agent may have added it since we last read the file, or may still be adding URLs.
	url, ok := f.URLs.Await(ctx, sha)
	if !ok {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chunk %s: no URL came within %s", sha, timeout)
		}
		return nil, &ChunkMissing{SHA256: sha, Why: "no URL in the url file"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sha, err)
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sha, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, &ChunkMissing{SHA256: sha, Why: "store answered 404"}
	case resp.StatusCode == http.StatusForbidden:
		// Most likely an expired URL: pick up whatever the agent wrote since, and let the retry use it.
		_ = f.URLs.Reload()
		return nil, fmt.Errorf("chunk %s: store answered 403", sha)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("chunk %s: store answered %d", sha, resp.StatusCode)
	}
	// Read at most one byte more than expected, so an oversized body is caught without reading it all.
	var buf bytes.Buffer
	buf.Grow(int(size))
	if _, err := io.Copy(&buf, io.LimitReader(resp.Body, size+1)); err != nil {
		return nil, fmt.Errorf("chunk %s: %w", sha, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(sum[:]); got != sha || int64(buf.Len()) != size {
		return nil, &ChunkInvalid{SHA256: sha, Got: got, Size: int64(buf.Len())}
	}
	return buf.Bytes(), nil
}

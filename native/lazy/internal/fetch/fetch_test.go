package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"snapflow/native/lazy/internal/testkit"
	"snapflow/native/lazy/internal/urlfile"
)

func chunk(s string) (string, []byte) {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:]), []byte(s)
}

func setup(t *testing.T, tok string) (*testkit.Store, *Fetcher, string, []byte, string) {
	t.Helper()
	sha, data := chunk("some chunk bytes")
	store := testkit.NewStore(map[string][]byte{sha: data})
	t.Cleanup(store.Close)
	path := filepath.Join(t.TempDir(), "urls.json")
	if err := store.WriteURLs(path, []string{sha}, tok); err != nil {
		t.Fatal(err)
	}
	urls, err := urlfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return store, &Fetcher{URLs: urls, Timeout: 300 * time.Millisecond, Retries: 2, Backoff: 10 * time.Millisecond}, sha, data, path
}

func TestGetReturnsVerifiedBytes(t *testing.T) {
	_, f, sha, data, _ := setup(t, "")
	res, err := f.Get(context.Background(), sha, int64(len(data)))
	if err != nil || string(res.Data) != string(data) || res.Attempts != 1 {
		t.Fatalf("got %q, %d attempts, %v", res.Data, res.Attempts, err)
	}
}

func TestCorruptedChunkIsRetriedThenRefused(t *testing.T) {
	store, f, sha, data, _ := setup(t, "")
	store.Corrupt(sha)
	res, err := f.Get(context.Background(), sha, int64(len(data)))
	var invalid *ChunkInvalid
	if !errors.As(err, &invalid) || res.Data != nil || res.Attempts != 3 {
		t.Fatalf("want ChunkInvalid after 3 attempts and no data, got %v, %d attempts, %q", err, res.Attempts, res.Data)
	}
}

func TestMissingChunkIsNotRetried(t *testing.T) {
	store, f, sha, data, _ := setup(t, "")
	store.Missing(sha)
	res, err := f.Get(context.Background(), sha, int64(len(data)))
	var missing *ChunkMissing
	if !errors.As(err, &missing) || res.Attempts != 1 {
		t.Fatalf("want ChunkMissing after 1 attempt, got %v after %d", err, res.Attempts)
	}
}

func TestStalledStoreIsAbandonedAndRetried(t *testing.T) {
	store, f, sha, data, _ := setup(t, "")
	store.Stall(sha, 1, 10*time.Second)
	start := time.Now()
	res, err := f.Get(context.Background(), sha, int64(len(data)))
	if err != nil || res.Attempts != 2 {
		t.Fatalf("want success on attempt 2, got %v after %d", err, res.Attempts)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v: the stalled attempt was not cut at its deadline", d)
	}
}

func TestExpiredURLIsRenewedFromTheRewrittenFile(t *testing.T) {
	store, f, sha, data, path := setup(t, "old")
	store.RequireToken("new")
	// The agent renews URLs by rewriting the file; the fetcher holds the old ones until a 403 makes it re-read.
	if err := store.WriteURLs(path, []string{sha}, "new"); err != nil {
		t.Fatal(err)
	}
	res, err := f.Get(context.Background(), sha, int64(len(data)))
	if err != nil || res.Attempts != 2 {
		t.Fatalf("want success after renewal, got %v after %d attempts", err, res.Attempts)
	}
}

func TestRangeReadsTheBytesAskedForAndRenewsAnExpiredURL(t *testing.T) {
	store, f, sha, data, path := setup(t, "old")
	store.RequireToken("new")
	if err := store.WriteURLs(path, []string{sha}, "new"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	attempts, err := f.Range(context.Background(), sha, 5, 6, func(r io.Reader) error {
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	if err != nil || attempts != 2 || string(got) != string(data[5:11]) {
		t.Fatalf("want %q after a renewal, got %q after %d attempts: %v", data[5:11], got, attempts, err)
	}
}

func TestRangeRefusesAnAnswerShorterThanAsked(t *testing.T) {
	_, f, sha, data, _ := setup(t, "")
	// The object ends before the range does: the store answers what it has, and that is not taken for the whole.
	attempts, err := f.Range(context.Background(), sha, int64(len(data))-4, 8, func(r io.Reader) error {
		_, err := io.ReadAll(r)
		return err
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || attempts != 3 {
		t.Fatalf("want ErrUnexpectedEOF after 3 attempts, got %v after %d", err, attempts)
	}
}

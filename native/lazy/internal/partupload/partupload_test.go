package partupload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// store keeps PUT bodies by part number and answers as an S3 UploadPart does; fail decides an attempt's status first.
type store struct {
	mu       sync.Mutex
	parts    map[int][]byte
	attempts map[int]int
	fail     func(part, attempt int) (int, string)
	inflight int
	maxIn    int
	delay    time.Duration
}

func newStore(fail func(part, attempt int) (int, string)) (*store, *httptest.Server) {
	s := &store{parts: map[int][]byte{}, attempts: map[int]int{}, fail: fail}
	return s, httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("partNumber"))
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.attempts[n]++
		attempt := s.attempts[n]
		s.inflight++
		if s.inflight > s.maxIn {
			s.maxIn = s.inflight
		}
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.inflight--; s.mu.Unlock() }()
		if s.delay > 0 {
			time.Sleep(s.delay)
		}
		if s.fail != nil {
			if status, text := s.fail(n, attempt); status != 0 {
				w.WriteHeader(status)
				io.WriteString(w, text)
				return
			}
		}
		s.mu.Lock()
		s.parts[n] = body
		s.mu.Unlock()
		sum := sha256.Sum256(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	}))
}

func urls(base string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/k?partNumber=%d&uploadId=u&X-Amz-Signature=secret", base, i+1)
	}
	return out
}

// write sends data in uneven chunks, as zstd's writer does.
func write(t *testing.T, w *Writer, data []byte) error {
	t.Helper()
	r := rand.New(rand.NewSource(1))
	for len(data) > 0 {
		n := min(len(data), 1+r.Intn(100_000))
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func TestPartsAreEqualHashedAndComplete(t *testing.T) {
	// Part 2's first attempt fails with a 503: retried, not fatal.
	s, srv := newStore(func(part, attempt int) (int, string) {
		if part == 2 && attempt == 1 {
			return 503, "<Error><Code>SlowDown</Code></Error>"
		}
		return 0, ""
	})
	defer srv.Close()
	s.delay = 20 * time.Millisecond // slower than the writer: the bound on PUTs in flight is what holds them back
	data := make([]byte, 5*1024*1024+12345)
	rand.New(rand.NewSource(2)).Read(data)
	const partSize = 1 << 20
	w, err := New(context.Background(), Options{PartSize: partSize, Concurrency: 2, URLs: urls(srv.URL, 10), Backoff: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(t, w, data); err != nil {
		t.Fatal(err)
	}
	res, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Parts) != 6 || res.Bytes != int64(len(data)) || res.Retries != 1 {
		t.Fatalf("got %d parts, %d bytes, %d retries", len(res.Parts), res.Bytes, res.Retries)
	}
	var joined []byte
	for i, p := range res.Parts {
		got := s.parts[p.PartNumber]
		sum := sha256.Sum256(got)
		if p.PartNumber != i+1 || p.Sha256 != hex.EncodeToString(sum[:]) || p.Bytes != len(got) {
			t.Fatalf("part %d reported %+v; the store holds %d bytes", i+1, p, len(got))
		}
		if i < len(res.Parts)-1 && p.Bytes != partSize {
			t.Fatalf("part %d has %d bytes: every part but the last must have %d", p.PartNumber, p.Bytes, partSize)
		}
		joined = append(joined, got...)
	}
	if !bytes.Equal(joined, data) {
		t.Fatal("the parts do not make the stream")
	}
	// One filling, two in flight.
	if res.PeakBufferedBytes > 3*partSize || s.maxIn > 2 {
		t.Fatalf("held %d bytes, %d PUTs at once", res.PeakBufferedBytes, s.maxIn)
	}
}

func TestTooFewURLs(t *testing.T) {
	s, srv := newStore(nil)
	defer srv.Close()
	w, _ := New(context.Background(), Options{PartSize: 1 << 20, Concurrency: 2, URLs: urls(srv.URL, 2)})
	err := write(t, w, make([]byte, 2<<20+1))
	var few *TooFewURLs
	if !errors.As(err, &few) || few.URLs != 2 {
		t.Fatalf("want TooFewURLs, got %v", err)
	}
	w.Abort()
	if len(s.parts) > 2 {
		t.Fatalf("%d parts sent", len(s.parts))
	}
}

// A refused digest is final: no retry, the writer fails, and the error carries no URL query.
func TestRefusedPartIsNotRetried(t *testing.T) {
	s, srv := newStore(func(part, attempt int) (int, string) {
		return 400, "<Error><Code>BadDigest</Code><Message>x</Message></Error>"
	})
	defer srv.Close()
	w, _ := New(context.Background(), Options{PartSize: 1 << 20, Concurrency: 1, URLs: urls(srv.URL, 4), Backoff: 1})
	werr := write(t, w, make([]byte, 3<<20))
	_, err := w.Close()
	if err == nil {
		err = werr
	}
	var se *StoreError
	if !errors.As(err, &se) || !se.Refused || s.attempts[1] != 1 {
		t.Fatalf("want one refused attempt, got %v (attempts %v)", err, s.attempts)
	}
	if bytes.Contains([]byte(err.Error()), []byte("secret")) {
		t.Fatalf("error leaks the URL: %v", err)
	}
}

func TestExpiredURL(t *testing.T) {
	_, srv := newStore(func(part, attempt int) (int, string) {
		return 403, "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
	})
	defer srv.Close()
	w, _ := New(context.Background(), Options{PartSize: 1 << 20, Concurrency: 1, URLs: urls(srv.URL, 1)})
	w.Write([]byte("small"))
	_, err := w.Close()
	var se *StoreError
	if !errors.As(err, &se) || !se.Expired {
		t.Fatalf("want an expired URL, got %v", err)
	}
}

func TestEmptyStreamIsOneEmptyPart(t *testing.T) {
	s, srv := newStore(nil)
	defer srv.Close()
	w, _ := New(context.Background(), Options{PartSize: 1 << 20, Concurrency: 1, URLs: urls(srv.URL, 1)})
	res, err := w.Close()
	if err != nil || len(res.Parts) != 1 || res.Parts[0].Bytes != 0 || len(s.parts) != 1 {
		t.Fatalf("got %+v, %v", res, err)
	}
}

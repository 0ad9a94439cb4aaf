// Package partupload is an io.Writer that cuts what is written to it into equal parts and PUTs each to its presigned
// UploadPart URL while the writer goes on: the engine's archive leaves the sandbox for the store with no other process
// in its byte path (the agent, the Worker).
//
//	Write ──▶ the part being filled (exactly PartSize bytes; the last part may be shorter)
//	      ──▶ full: SHA-256 of its bytes, then PUT (retries: network errors, 5xx, 429) ── at most Concurrency at once
//	      ──▶ Close: the last part, then every PUT awaited → [{partNumber, etag, bytes, sha256}]
//
// R2's rule: every part but the last has the same size (≥ 5 MiB; the caller picks PartSize). Memory: a pool of at
// most Concurrency + 1 buffers of PartSize bytes (one filling, the others in flight); a Write that finds none free
// waits for a PUT to finish, so a slow store slows the writer (backpressure reaches the tree walk), never grows memory.
//
// Each part's SHA-256 is taken from its buffer before the PUT and reported: the Worker lists it in the completion and
// the store refuses an object whose parts have other bytes (BadDigest). The URLs cannot carry it: they were signed
// before the stream existed. A stream that needs more parts than URLs fails with *TooFewURLs before a byte of the extra
// part is sent; the Worker signs more and tries again.
package partupload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Options tunes an upload. Zero values of Retries, Backoff and Timeout take the defaults below.
type Options struct {
	PartSize    int
	Concurrency int
	// URLs[i] is the presigned UploadPart URL of part i + 1.
	URLs    []string
	Retries int           // attempts after the first, for network errors, 5xx and 429
	Backoff time.Duration // first pause; doubles each retry
	Timeout time.Duration // per attempt, the whole PUT
	Client  *http.Client
	// Lie is a test-only fault (the agent arms it through its faults.ts, never in production): part 1's first byte
	// is changed after it was hashed, so the part reported is not the part sent.
	Lie bool
}

const (
	defaultRetries = 2
	defaultBackoff = 200 * time.Millisecond
	defaultTimeout = 120 * time.Second
)

// Part is one uploaded part, as the Worker's completion lists it.
type Part struct {
	PartNumber int    `json:"partNumber"`
	ETag       string `json:"etag"`
	Bytes      int    `json:"bytes"`
	Sha256     string `json:"sha256"`
}

// Result is what Close reports.
type Result struct {
	Parts []Part `json:"parts"`
	Bytes int64  `json:"bytes"`
	// the most stream bytes held at once: the part being filled plus the parts in flight
	PeakBufferedBytes int64 `json:"peakBufferedBytes"`
	Retries           int   `json:"retries"`
}

// TooFewURLs: the stream needs a part beyond the last URL.
type TooFewURLs struct {
	URLs, PartSize int
	Bytes          int64
}

func (e *TooFewURLs) Error() string {
	return fmt.Sprintf("urls: the stream needs more than %d parts of %d bytes (more than %d bytes); presign more part URLs or choose a larger partSize", e.URLs, e.PartSize, e.Bytes)
}

// StoreError is a PUT the store answered with an error status. Expired: the URL's X-Amz-Expires passed (fresh URLs
// would do); Refused: the store will refuse these bytes whatever (a digest mismatch, a precondition).
type StoreError struct {
	PartNumber       int
	Status           int
	Body             string
	Expired, Refused bool
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("presigned PUT of part %d answered %s", e.PartNumber, e.Describe())
}

// Describe is the status and the store's own <Code> and <Message>, when its body has them: "403 AccessDenied: Request
// has expired".
func (e *StoreError) Describe() string {
	code, message := xmlField.FindStringSubmatch(e.Body), xmlMessage.FindStringSubmatch(e.Body)
	switch {
	case code != nil && message != nil:
		return fmt.Sprintf("%d %s: %s", e.Status, code[1], message[1])
	case code != nil:
		return fmt.Sprintf("%d %s", e.Status, code[1])
	default:
		return fmt.Sprintf("%d %s", e.Status, strings.TrimSpace(e.Body))
	}
}

func (e *StoreError) retryable() bool {
	return !e.Expired && !e.Refused && (e.Status >= 500 || e.Status == 429)
}

var (
	expiredBody = regexp.MustCompile(`(?i)<Message>[^<]*expired[^<]*</Message>|<Code>(ExpiredToken|RequestExpired|TokenRefreshRequired)</Code>`)
	refusedBody = regexp.MustCompile(`<Code>(BadDigest|InvalidDigest|PreconditionFailed|XAmzContentChecksumMismatch)</Code>`)
	xmlField    = regexp.MustCompile(`<Code>([^<]{1,100})</Code>`)
	xmlMessage  = regexp.MustCompile(`<Message>([^<]{1,300})</Message>`)
	// an ETag goes into the completion's XML: nothing that could be markup
	etagShape = regexp.MustCompile(`^[^<>&"'\s]{1,200}$`)
)

// Writer uploads what is written to it. Not safe for concurrent Writes.
type Writer struct {
	o      Options
	ctx    context.Context
	cancel context.CancelFunc
	free   chan []byte
	made   int
	// slots bounds the PUTs in flight to Concurrency: a full part waits here, in the writer, for one to finish
	slots chan struct{}

	fill   []byte // the part being filled
	filled int
	next   int // the next part's number - 1
	bytes  int64

	mu       sync.Mutex
	parts    []Part
	firstErr error
	held     int64
	peak     int64
	retries  int
	wg       sync.WaitGroup
}

// New starts an upload; ctx ending stops every PUT.
func New(ctx context.Context, o Options) (*Writer, error) {
	if o.PartSize <= 0 || o.Concurrency <= 0 || len(o.URLs) == 0 {
		return nil, errors.New("partupload: PartSize, Concurrency and URLs are required")
	}
	if o.Retries == 0 {
		o.Retries = defaultRetries
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.Backoff == 0 {
		o.Backoff = defaultBackoff
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: o.Concurrency, IdleConnTimeout: 90 * time.Second}}
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Writer{o: o, ctx: ctx, cancel: cancel, free: make(chan []byte, o.Concurrency+1), slots: make(chan struct{}, o.Concurrency)}, nil
}

// buffer returns a free part buffer, waiting for a PUT to finish when all Concurrency + 1 are taken.
func (w *Writer) buffer() ([]byte, error) {
	select {
	case b := <-w.free:
		return b, nil
	default:
	}
	if w.made < w.o.Concurrency+1 {
		w.made++
		return make([]byte, w.o.PartSize), nil
	}
	select {
	case b := <-w.free:
		return b, nil
	case <-w.ctx.Done():
		return nil, w.failure()
	}
}

func (w *Writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstErr != nil {
		return w.firstErr
	}
	return w.ctx.Err()
}

func (w *Writer) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if err := w.failed(); err != nil {
			return written, err
		}
		if w.fill == nil {
			if w.next >= len(w.o.URLs) {
				w.fail(&TooFewURLs{URLs: len(w.o.URLs), PartSize: w.o.PartSize, Bytes: w.bytes})
				return written, w.failed()
			}
			b, err := w.buffer()
			if err != nil {
				return written, err
			}
			w.fill, w.filled = b, 0
		}
		n := copy(w.fill[w.filled:], p)
		w.filled += n
		w.bytes += int64(n)
		w.hold(int64(n))
		written += n
		p = p[n:]
		if w.filled == w.o.PartSize {
			if err := w.dispatch(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// Err is the upload's own failure, if any: a caller whose writes failed through other layers (a compressor) learns
// the cause here.
func (w *Writer) Err() error { return w.failed() }

func (w *Writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstErr == nil {
		w.firstErr = err
		w.cancel()
	}
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstErr
}

func (w *Writer) hold(n int64) {
	w.mu.Lock()
	w.held += n
	if w.held > w.peak {
		w.peak = w.held
	}
	w.mu.Unlock()
}

// dispatch sends the part being filled, once fewer than Concurrency PUTs are in flight.
func (w *Writer) dispatch() error {
	select {
	case w.slots <- struct{}{}:
	case <-w.ctx.Done():
		return w.failure()
	}
	buf, size := w.fill, w.filled
	w.next++
	number, url := w.next, w.o.URLs[w.next-1]
	w.fill, w.filled = nil, 0
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.slots }()
		body := buf[:size]
		sum := sha256.Sum256(body)
		if w.o.Lie && number == 1 && size > 0 {
			body[0] ^= 0xff
		}
		etag, retries, err := w.putWithRetries(number, url, body)
		if err != nil {
			w.fail(err)
		}
		w.mu.Lock()
		w.retries += retries
		w.held -= int64(size)
		if err == nil {
			w.parts = append(w.parts, Part{PartNumber: number, ETag: etag, Bytes: size, Sha256: hex.EncodeToString(sum[:])})
		}
		w.mu.Unlock()
		w.free <- buf
	}()
	return nil
}

// Close sends the last part (the one empty part of an empty stream) and waits for every PUT.
func (w *Writer) Close() (Result, error) {
	defer w.cancel()
	if err := w.failed(); err == nil && (w.filled > 0 || w.next == 0) {
		if w.fill == nil {
			b, err := w.buffer()
			if err != nil {
				w.wg.Wait()
				return Result{}, err
			}
			w.fill = b
		}
		if err := w.dispatch(); err != nil {
			w.wg.Wait()
			return Result{}, err
		}
	}
	w.wg.Wait()
	if err := w.failed(); err != nil {
		return Result{}, err
	}
	parts := append([]Part(nil), w.parts...)
	sortParts(parts)
	return Result{Parts: parts, Bytes: w.bytes, PeakBufferedBytes: w.peak, Retries: w.retries}, nil
}

// Abort stops the PUTs in flight and waits for them; the upload is left for the Worker to abort.
func (w *Writer) Abort() {
	w.cancel()
	w.wg.Wait()
}

func sortParts(parts []Part) {
	for i := 1; i < len(parts); i++ {
		for j := i; j > 0 && parts[j].PartNumber < parts[j-1].PartNumber; j-- {
			parts[j], parts[j-1] = parts[j-1], parts[j]
		}
	}
}

// putWithRetries returns the part's ETag and how many retries it took.
func (w *Writer) putWithRetries(number int, url string, body []byte) (string, int, error) {
	backoff := w.o.Backoff
	for attempt := 0; ; attempt++ {
		etag, err := w.put(number, url, body)
		if err == nil {
			return etag, attempt, nil
		}
		var store *StoreError
		permanent := errors.As(err, &store) && !store.retryable()
		if permanent || attempt >= w.o.Retries || w.ctx.Err() != nil {
			return "", attempt, err
		}
		select {
		case <-w.ctx.Done():
			return "", attempt, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (w *Writer) put(number int, url string, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("part %d: %w", number, err)
	}
	req.ContentLength = int64(len(body))
	resp, err := w.o.Client.Do(req)
	if err != nil {
		// *url.Error carries the URL, whose query is a credential: keep only what failed.
		return "", fmt.Errorf("presigned PUT of part %d failed: %w", number, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4000))
	if resp.StatusCode/100 != 2 {
		s := string(text)
		return "", &StoreError{PartNumber: number, Status: resp.StatusCode, Body: s, Expired: resp.StatusCode == 403 && expiredBody.MatchString(s), Refused: resp.StatusCode == 412 || refusedBody.MatchString(s)}
	}
	etag := strings.ReplaceAll(resp.Header.Get("ETag"), `"`, "")
	if !etagShape.MatchString(etag) {
		return "", &StoreError{PartNumber: number, Status: resp.StatusCode, Body: fmt.Sprintf("no usable ETag (%q)", etag), Refused: true}
	}
	return etag, nil
}

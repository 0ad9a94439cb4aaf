package unpack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Download reads one presigned URL from start to end as a single stream, resuming where it broke off: a connection
// that fails or ends early is asked again with `Range: bytes=<next>-` (the store must answer 206 from exactly that
// byte), up to Retries times, backing off between tries. A store that sends nothing for Idle is abandoned (that
// attempt fails and is retried), never waited on for good. The caller hashes what comes out: a resumed body is the
// same object's next bytes or the stream fails.
type Download struct {
	URL     string
	Client  *http.Client
	Idle    time.Duration
	Retries int
	// Attempts counts the requests made (1 without a resume).
	Attempts int

	ctx    context.Context
	body   io.ReadCloser
	cancel context.CancelFunc
	timer  *time.Timer
	off    int64
	size   int64 // the object's size, from the first answer; -1 when not said (a range's length when ranged)
	// ranged: only [start, start+size) is asked for, every answer a 206 (NewRangeDownload)
	ranged bool
	start  int64
	tries  int
	failed error
}

// NewDownload prepares a Download; nothing is requested before the first Read.
func NewDownload(ctx context.Context, url string, idle time.Duration, retries int) *Download {
	return &Download{URL: url, Client: http.DefaultClient, Idle: idle, Retries: retries, ctx: ctx, size: -1}
}

// NewRangeDownload prepares a Download of the object's bytes [start, start+length) (length > 0): each request asks
// `Range: bytes=<start+read>-<start+length-1>` and must be answered 206 from exactly that byte.
func NewRangeDownload(ctx context.Context, url string, start, length int64, idle time.Duration, retries int) *Download {
	return &Download{URL: url, Client: http.DefaultClient, Idle: idle, Retries: retries, ctx: ctx, size: length, ranged: true, start: start}
}

var contentRange = regexp.MustCompile(`^bytes (\d+)-\d+/(\d+|\*)$`)

func (d *Download) open() error {
	ctx, cancel := context.WithCancel(d.ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
	if err != nil {
		cancel()
		return &Error{Code: "bad_request", Message: "url: " + err.Error(), Field: "url"}
	}
	from := d.start + d.off
	switch {
	case d.ranged:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", from, d.start+d.size-1))
	case d.off > 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", d.off))
	}
	d.Attempts++
	// The deadline on the store's silence: armed now for the headers, re-armed by every read that brings bytes.
	d.timer = time.AfterFunc(d.Idle, cancel)
	resp, err := d.Client.Do(req)
	if err != nil {
		d.timer.Stop()
		cancel()
		return d.stalledOr(err)
	}
	want := http.StatusOK
	if d.off > 0 || d.ranged {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		resp.Body.Close()
		d.timer.Stop()
		cancel()
		return &httpStatus{status: resp.StatusCode, text: strings.TrimSpace(string(text))}
	}
	if d.off == 0 && !d.ranged {
		d.size = resp.ContentLength
	} else if m := contentRange.FindStringSubmatch(resp.Header.Get("Content-Range")); m == nil || m[1] != strconv.FormatInt(from, 10) {
		resp.Body.Close()
		d.timer.Stop()
		cancel()
		return &Error{Code: "tool_failed", Message: fmt.Sprintf("presigned GET: asked to resume at byte %d, the store answered %q", from, resp.Header.Get("Content-Range"))}
	}
	d.body, d.cancel = resp.Body, cancel
	return nil
}

// httpStatus is a store's answer other than the one asked for: 4xx are final, 5xx are retried.
type httpStatus struct {
	status int
	text   string
}

func (e *httpStatus) Error() string {
	return fmt.Sprintf("presigned GET answered %d: %s", e.status, e.text)
}

func (d *Download) stalledOr(err error) error {
	if d.ctx.Err() == nil && d.timer != nil && !d.timer.Stop() {
		return fmt.Errorf("presigned GET: the store sent nothing for %s (stalled); aborted", d.Idle)
	}
	return err
}

func (d *Download) close() {
	if d.body != nil {
		d.body.Close()
		d.body = nil
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.cancel != nil {
		d.cancel()
		d.cancel = nil
	}
}

// Read answers the object's next bytes, resuming after a failure as the type's comment says.
func (d *Download) Read(p []byte) (int, error) {
	if d.failed != nil {
		return 0, d.failed
	}
	for {
		if d.body == nil {
			if err := d.open(); err != nil {
				if d.retry(err) {
					continue
				}
				d.failed = failure(err)
				return 0, d.failed
			}
		}
		n, err := d.body.Read(p)
		if n > 0 {
			d.off += int64(n)
			d.timer.Reset(d.Idle)
			d.tries = 0 // bytes came: the next failure starts its own count
		}
		if err == nil {
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err == io.EOF && (d.size < 0 || d.off >= d.size) {
			d.close()
			d.failed = io.EOF // read again after the end (a buffered reader does), it stays the end
			return n, io.EOF
		}
		if err == io.EOF {
			err = fmt.Errorf("presigned GET: the body ended at byte %d of %d", d.off, d.size)
		} else {
			err = d.stalledOr(err)
		}
		d.close()
		if !d.retry(err) {
			d.failed = failure(err)
			if n > 0 {
				return n, nil
			}
			return 0, d.failed
		}
		if n > 0 {
			return n, nil
		}
	}
}

// failure is how a download's last error is answered: the engine's own as it is, the rest as tool_failed.
func failure(err error) error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return &Error{Code: "tool_failed", Message: err.Error()}
}

// retry waits before the next attempt and answers whether one is left for err.
func (d *Download) retry(err error) bool {
	if s, ok := err.(*httpStatus); ok && s.status < 500 {
		return false
	}
	if _, ok := err.(*Error); ok {
		return false
	}
	if d.tries >= d.Retries || d.ctx.Err() != nil {
		return false
	}
	pause := 200 * time.Millisecond << d.tries
	d.tries++
	select {
	case <-d.ctx.Done():
		return false
	case <-time.After(pause):
		return true
	}
}

// Close releases the connection.
func (d *Download) Close() error {
	d.close()
	return nil
}

package fetch

import (
	"context"
	"fmt"
	"io"
)

// Range reads [off, off+n) of the object whose URL the URL file keys by key (a pack's name) with one Range GET per
// attempt, handing use the body (exactly n bytes; a short body is an error use sees as a read error). Attempts are
// retried with backoff as Get's are, a 403 re-reading the URL file first; use's error fails the attempt, and only
// a *ChunkMissing stops the retries. use may run more than once: it must tolerate a repeat of what an earlier
// attempt already handled.
func (f *Fetcher) Range(ctx context.Context, key string, off, n int64, use func(io.Reader) error) (int, error) {
	return f.retry(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, f.timeout())
		defer cancel()
		body, err := f.open(ctx, key, fmt.Sprintf("bytes=%d-%d", off, off+n-1), 206)
		if err != nil {
			return err
		}
		defer body.Close()
		return use(&exact{r: body, left: n, what: key})
	})
}

// exact ends at n bytes and turns an early end of the body into io.ErrUnexpectedEOF, so a cut-off answer is never
// taken for a whole one.
type exact struct {
	r    io.Reader
	left int64
	what string
}

func (e *exact) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	k, err := e.r.Read(p)
	e.left -= int64(k)
	if err == io.EOF && e.left > 0 {
		return k, fmt.Errorf("%s: the store's answer ended %d bytes early: %w", e.what, e.left, io.ErrUnexpectedEOF)
	}
	if err == io.EOF {
		err = nil
	}
	return k, err
}

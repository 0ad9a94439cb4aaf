package filecas

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"snapflow/native/lazy/internal/unpack"
)

// fetcher runs requests one after another: one Range GET each (resumed after a break, abandoned when the store goes
// silent for Idle: internal/unpack's Download), its chunks read in offset order with the gaps between them
// discarded, each zstd frame decoded and its SHA-256 compared with its name before a byte of it is written.
type fetcher struct {
	r   *restore
	w   *writer
	dec *zstd.Decoder
	src []byte
	dst []byte
}

func newFetcher(r *restore) (*fetcher, error) {
	// DecodeAll refuses a frame that would decode past MaxChunk: no chunk may grow a buffer beyond it.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(r.o.Limits.MaxChunk)))
	if err != nil {
		return nil, err
	}
	return &fetcher{r: r, dec: dec, w: &writer{r: r, scratch: make([]byte, 256<<10), zeros: make([]byte, unpack.HoleBlock)}}, nil
}

func (f *fetcher) close() { f.dec.Close() }

// counter counts the bytes a request brought.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (f *fetcher) run(ctx context.Context, q request) error {
	x := f.r.x
	d := unpack.NewRangeDownload(ctx, f.r.o.Packs[x.Packs[q.pack].Name], q.start, q.end-q.start, f.r.o.Idle, f.r.o.Retries)
	d.Client = f.r.o.Client
	counted := &counter{r: d}
	defer func() {
		d.Close()
		f.w.release()
		f.r.requests.Add(int64(d.Attempts))
		f.r.fetched.Add(counted.n)
	}()
	body := bufio.NewReaderSize(counted, 256<<10)
	pos := q.start
	for _, c := range q.chunks {
		ch := &x.Chunks[c]
		if _, err := body.Discard(int(ch.Offset - pos)); err != nil {
			return fetchError(err)
		}
		if int64(cap(f.src)) < ch.Stored {
			f.src = make([]byte, ch.Stored)
		}
		src := f.src[:ch.Stored]
		if _, err := io.ReadFull(body, src); err != nil {
			return fetchError(err)
		}
		pos = ch.Offset + ch.Stored
		data, err := f.dec.DecodeAll(src, f.dst[:0])
		if err != nil {
			return f.damaged(c, fmt.Sprintf("its zstd frame does not decode (%v)", err))
		}
		f.dst = data[:0]
		if int64(len(data)) != ch.Size {
			return f.damaged(c, fmt.Sprintf("it decodes to %d bytes, not %d", len(data), ch.Size))
		}
		sum := sha256.Sum256(data)
		got := hex.EncodeToString(sum[:])
		if got != ch.Sha256 {
			return f.damaged(c, "its bytes have SHA-256 "+got)
		}
		f.r.chunks.Add(1)
		for _, u := range f.r.plan.uses[c] {
			if err := f.w.put(u, data, got); err != nil {
				return err
			}
		}
	}
	return nil
}

// damaged: the pack's bytes are not the chunk the index names; nothing of them was written.
func (f *fetcher) damaged(c int, why string) error {
	ch := &f.r.x.Chunks[c]
	return &Error{Code: "verify_failed", Field: "packs", Message: fmt.Sprintf("chunk %s (pack %s, offset %d), used by %s, is damaged: %s", ch.Sha256, f.r.x.Packs[ch.Pack].Name, ch.Offset, f.r.plan.uses[c][0].f.e.Path, why)}
}

// fetchError: the download's own failure as it is (the engine's codes); a body cut short is tool_failed.
func fetchError(err error) error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return &Error{Code: "tool_failed", Message: "pack GET: " + err.Error()}
}

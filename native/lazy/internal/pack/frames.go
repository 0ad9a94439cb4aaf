package pack

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// frameWriter compresses its input as independent zstd frames of frameSize bytes, up to `workers` at once, and writes
// them to out in order. A stream of concatenated frames is one valid zstd stream (zstd -d and every reader take it).
//
// Why: klauspost's stream encoder compresses a stream's blocks one after another (its concurrency only overlaps
// encoding with output), so the engine's zstd used one core while `zstd -T0`, the floor's, uses every core by cutting
// its input into jobs. Frames lose the matches that would reach back across a frame's start: a little of the ratio.
// On the npm workspace (550 MB, 31.7k entries; this 2-core box, quiet, engine alone to a file): one stream 3.91–5.32 s,
// 116.6 MB; frames of 4 MiB 2.67–2.97 s, 123.6 MB; 8 MiB 2.47–2.79 s, 120.8 MB; 16 MiB 2.74–2.78 s, 118.1 MB; the
// floor's `zstd -T0 -3` makes 123.0 MB. 8 MiB: (workers + 1) × 8 MiB of input held, and the output beside it.
type frameWriter struct {
	out       io.Writer
	enc       *zstd.Encoder
	frameSize int
	filling   []byte
	queue     chan *frame // frames in input order; the writer waits for each to be encoded
	slots     chan struct{}
	written   chan struct{}
	queued    int
	err       error
	errMu     sync.Mutex
}

type frame struct {
	in   []byte
	out  []byte
	done chan struct{}
}

func newFrameWriter(out io.Writer, enc *zstd.Encoder, frameSize, workers int) *frameWriter {
	f := &frameWriter{out: out, enc: enc, frameSize: frameSize, queue: make(chan *frame, workers), slots: make(chan struct{}, workers), written: make(chan struct{})}
	go f.writeInOrder()
	return f
}

func (f *frameWriter) failed() error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}

func (f *frameWriter) fail(err error) {
	f.errMu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.errMu.Unlock()
}

// writeInOrder writes each frame once encoded, in the order they were queued.
func (f *frameWriter) writeInOrder() {
	defer close(f.written)
	for fr := range f.queue {
		<-fr.done
		if f.failed() == nil {
			if _, err := f.out.Write(fr.out); err != nil {
				f.fail(err)
			}
		}
		<-f.slots
	}
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if err := f.failed(); err != nil {
			return n - len(p), err
		}
		if f.filling == nil {
			f.filling = make([]byte, 0, f.frameSize)
		}
		take := min(f.frameSize-len(f.filling), len(p))
		f.filling = append(f.filling, p[:take]...)
		p = p[take:]
		if len(f.filling) == f.frameSize {
			f.dispatch()
		}
	}
	return n, nil
}

// dispatch encodes the frame being filled on a goroutine of its own, once one of `workers` slots is free.
func (f *frameWriter) dispatch() {
	fr := &frame{in: f.filling, done: make(chan struct{})}
	f.filling = nil
	f.queued++
	f.slots <- struct{}{}
	f.queue <- fr
	go func() {
		fr.out = f.enc.EncodeAll(fr.in, make([]byte, 0, len(fr.in)/2))
		fr.in = nil
		close(fr.done)
	}()
}

// Close encodes what is left (an empty input still makes one frame) and waits for every frame to be written.
func (f *frameWriter) Close() error {
	if len(f.filling) > 0 || f.queued == 0 {
		if f.filling == nil {
			f.filling = []byte{}
		}
		f.dispatch()
	}
	close(f.queue)
	<-f.written
	return f.failed()
}

package pack

import (
	"io"
	"sync"

	"snapflow/native/lazy/internal/czstd"
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
//
// Its buffers are made once and handed round (ins, outs), not made per frame: a fresh 8 MiB slice is zeroed by the
// runtime, and an output slice that outgrew its guess was copied. With the tar written straight in (no 1 MiB buffer
// before it, pack.go), a pack of the npm workspace took 2.62 CPU-s instead of 2.81 (BenchmarkPackTree, 3 × 3 alternated).
type frameWriter struct {
	out       io.Writer
	enc       czstd.Encoder
	frameSize int
	ins       chan []byte // input buffers free again: at most workers + 1 exist (one filling, one per frame encoding)
	outs      chan []byte // output buffers free again: at most workers exist (one per frame between dispatch and write)
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

func newFrameWriter(out io.Writer, enc czstd.Encoder, frameSize, workers int) *frameWriter {
	f := &frameWriter{out: out, enc: enc, frameSize: frameSize, ins: make(chan []byte, workers+1), outs: make(chan []byte, workers), queue: make(chan *frame, workers), slots: make(chan struct{}, workers), written: make(chan struct{})}
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

// buffer takes a free buffer of pool, or makes one of capacity size.
func buffer(pool chan []byte, size int) []byte {
	select {
	case b := <-pool:
		return b[:0]
	default:
		return make([]byte, 0, size)
	}
}

// recycle hands b back to pool (kept only while the pool has room).
func recycle(pool chan []byte, b []byte) {
	select {
	case pool <- b:
	default:
	}
}

// outputBound: zstd's worst case for an input of n bytes (incompressible: stored blocks, their headers, the frame's).
func outputBound(n int) int { return n + n/128 + 1024 }

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
		recycle(f.outs, fr.out) // io.Writer: out keeps nothing of what it was given
		fr.out = nil
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
			f.filling = buffer(f.ins, f.frameSize)
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
		fr.out = f.enc.EncodeAll(fr.in, buffer(f.outs, outputBound(f.frameSize)))
		recycle(f.ins, fr.in)
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

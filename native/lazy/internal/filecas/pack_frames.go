package filecas

import (
	"crypto/sha256"
	"hash"
	"io"
	"runtime"
	"sync"

	"snapflow/native/lazy/internal/czstd"
)

// framer compresses each new chunk as its own zstd frame, up to `threads` at once (EncodeAll on one shared encoder,
// as pack's frames.go does), and writes the frames to the pack in the order the chunks were found, so the same tree
// makes the same pack byte for byte. Each chunk's place in the pack is recorded as its frame is written.
//
// Memory: the chunks waiting or being compressed hold at most `budget` bytes of input (the reader waits for room),
// plus their frames until written.
type framer struct {
	enc    czstd.Encoder
	out    *counted
	work   chan *job
	order  chan *job
	room   *budget
	wrote  chan struct{}
	errMu  sync.Mutex
	err    error
	chunks int
	raw    int64
}

type job struct {
	data []byte
	ref  *Chunk
	out  []byte
	done chan struct{}
}

// counted hashes and counts the pack on its way out.
type counted struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *counted) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.h.Write(b[:n])
	c.n += int64(n)
	return n, err
}

func newFramer(out io.Writer, level, threads, avg int) (*framer, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if level == 0 {
		level = 3
	}
	// No frame checksum: a restore checks each chunk's SHA-256 against its name, which says more (xxhash was ~3 % of
	// a full backup's CPU, 4 bytes a frame).
	// zstd's C library where the build has it, as the tar archive's frames (pack/frames.go, internal/czstd).
	enc, err := czstd.New(level, false, threads)
	if err != nil {
		return nil, err
	}
	f := &framer{enc: enc, out: &counted{w: out, h: sha256.New()}, work: make(chan *job, 4*threads), order: make(chan *job, 1024),
		room: newBudget(max(16<<20, int64(2*threads)*int64(avg)*4)), wrote: make(chan struct{})}
	for range threads {
		go func() {
			for j := range f.work {
				// Room for a frame of incompressible data (raw blocks: a few bytes per 128 KiB), so it never grows.
				j.out = f.enc.EncodeAll(j.data, make([]byte, 0, len(j.data)+len(j.data)>>10+64))
				close(j.done)
			}
		}()
	}
	go f.writeInOrder()
	return f, nil
}

func (f *framer) failed() error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}

// add queues a new chunk's bytes (the framer owns data from here) for ref, whose Offset and Stored its frame's write
// sets. It fails once a write to the pack has failed.
func (f *framer) add(data []byte, ref *Chunk) error {
	if err := f.failed(); err != nil {
		return err
	}
	f.room.take(int64(len(data)))
	j := &job{data: data, ref: ref, done: make(chan struct{})}
	f.chunks++
	f.raw += int64(len(data))
	f.order <- j
	f.work <- j
	return nil
}

func (f *framer) writeInOrder() {
	defer close(f.wrote)
	for j := range f.order {
		<-j.done
		if f.failed() == nil {
			j.ref.Offset, j.ref.Stored = f.out.n, int64(len(j.out))
			if _, err := f.out.Write(j.out); err != nil {
				f.errMu.Lock()
				f.err = err
				f.errMu.Unlock()
			}
		}
		f.room.give(int64(len(j.data)))
	}
}

// close waits for every frame to be written; answers the pack's count and hash.
func (f *framer) close() (*counted, error) {
	close(f.work)
	close(f.order)
	<-f.wrote
	return f.out, f.failed()
}

// budget bounds the bytes held: take waits until n more fit (or nothing is held, so one large chunk always passes).
type budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	held int64
	max  int64
}

func newBudget(max int64) *budget {
	b := &budget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *budget) take(n int64) {
	b.mu.Lock()
	for b.held > 0 && b.held+n > b.max {
		b.cond.Wait()
	}
	b.held += n
	b.mu.Unlock()
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.held -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

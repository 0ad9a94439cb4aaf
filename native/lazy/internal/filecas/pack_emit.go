package filecas

import (
	"bytes"

	"github.com/klauspost/compress/zstd"

	"snapflow/native/lazy/internal/pack"
)

// emitter writes each entry, in walk order, to the manifest and to the index's entry list, on a goroutine of its own:
// the reader goes on with the next files meanwhile. An index entry is its MessagePack tuple (what Encode writes for
// it); the list is compressed as it grows, into a zstd frame of its own that ends the index (indexFile.write puts
// the rest, and the list's length, before it), so the pass's end compresses only the head (packs and chunk table).
type emitter struct {
	pass    *pack.Pass
	in      chan []Entry
	batch   []Entry
	entries bytes.Buffer // the compressed list
	z       *zstd.Encoder
	n       int
	err     error
	done    chan struct{}
}

const emitBatch = 256

func newEmitter(pass *pack.Pass) (*emitter, error) {
	m := &emitter{pass: pass, in: make(chan []Entry, 16), done: make(chan struct{})}
	z, err := zstd.NewWriter(&m.entries, zstd.WithEncoderLevel(indexLevel), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	m.z = z
	go m.run()
	return m, nil
}

func (m *emitter) run() {
	defer close(m.done)
	var one []byte
	for batch := range m.in {
		for i := range batch {
			if m.err != nil {
				break
			}
			e := &batch[i]
			if m.err = m.pass.Add(&e.Entry); m.err != nil {
				break
			}
			if one, m.err = e.MarshalMsg(one[:0]); m.err != nil {
				break
			}
			_, m.err = m.z.Write(one)
			m.n++
		}
	}
	if err := m.z.Close(); m.err == nil {
		m.err = err
	}
}

// add queues e (its chunk indexes final).
func (m *emitter) add(e Entry) {
	m.batch = append(m.batch, e)
	if len(m.batch) == emitBatch {
		m.in <- m.batch
		m.batch = make([]Entry, 0, emitBatch)
	}
}

// close waits for every entry to be written and the list's frame to end.
func (m *emitter) close() error {
	if len(m.batch) > 0 {
		m.in <- m.batch
	}
	close(m.in)
	<-m.done
	return m.err
}

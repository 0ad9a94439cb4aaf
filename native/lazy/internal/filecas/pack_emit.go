package filecas

import (
	"bytes"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"snapflow/native/lazy/internal/pack"
)

// emitter writes each entry, in walk order, to the manifest and to the index's entry list, on a goroutine of its own:
// the reader goes on with the next files meanwhile. An index entry is its manifest entry's JSON (encoded once, as the
// manifest writes it) with its chunks, data regions and node after it, which is what Encode writes for it; the list
// is compressed as it grows, into a zstd frame of its own that ends the index (indexFile.write puts the rest before
// it), so the pass's end compresses only the head (packs and chunk table: 3.3 MB of JSON for the npm workspace,
// beside the list's 10.3 MB).
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
			var manifest []byte
			if manifest, m.err = m.pass.AddJSON(&e.Entry); m.err != nil {
				break
			}
			one = appendIndexEntry(one[:0], manifest, e, m.n > 0)
			_, m.err = m.z.Write(one)
			m.n++
		}
	}
	if m.err == nil {
		_, m.err = m.z.Write([]byte("]}\n"))
	}
	if err := m.z.Close(); m.err == nil {
		m.err = err
	}
}

// appendIndexEntry appends e as the index lists it: its manifest JSON (an object) less its closing brace, then the
// fields the index adds (Entry's, in order, each left out when empty).
func appendIndexEntry(b, manifest []byte, e *Entry, comma bool) []byte {
	if comma {
		b = append(b, ',')
	}
	b = append(b, manifest[:len(manifest)-1]...)
	if len(e.Chunks) > 0 {
		b = append(b, `,"chunks":[`...)
		for k, c := range e.Chunks {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c), 10)
		}
		b = append(b, ']')
	}
	if len(e.Data) > 0 {
		b = append(b, `,"data":[`...)
		for k, r := range e.Data {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = strconv.AppendInt(b, r[0], 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, r[1], 10)
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	if e.Node != "" {
		b = append(b, `,"node":`...)
		b = strconv.AppendQuote(b, e.Node) // fifo, char or block: nothing to escape
	}
	return append(b, '}')
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

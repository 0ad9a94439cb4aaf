package filecas

import (
	"bytes"

	json "github.com/goccy/go-json"

	"snapflow/native/lazy/internal/pack"
)

// emitter writes each entry, in walk order, to the manifest and, as JSON, to the index's entry list, on a goroutine
// of its own: the reader goes on with the next files meanwhile (on the npm workspace the two encodings are ~60 ms of
// an incremental's CPU). The list is held encoded (~11 MB for 31.7k entries) until the chunks' places are known.
type emitter struct {
	pass    *pack.Pass
	in      chan []Entry
	batch   []Entry
	entries bytes.Buffer
	n       int
	err     error
	done    chan struct{}
}

const emitBatch = 256

func newEmitter(pass *pack.Pass) *emitter {
	m := &emitter{pass: pass, in: make(chan []Entry, 16), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *emitter) run() {
	defer close(m.done)
	// As Encode writes them: json.Encoder's defaults (HTML escaped), each value then a newline, which is dropped.
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	for batch := range m.in {
		for i := range batch {
			if m.err != nil {
				break
			}
			if m.err = m.pass.Add(&batch[i].Entry); m.err != nil {
				break
			}
			one.Reset()
			if m.err = enc.Encode(&batch[i]); m.err != nil {
				break
			}
			if m.n > 0 {
				m.entries.WriteByte(',')
			}
			m.entries.Write(bytes.TrimSuffix(one.Bytes(), []byte{'\n'}))
			m.n++
		}
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

// close waits for every entry to be written.
func (m *emitter) close() error {
	if len(m.batch) > 0 {
		m.in <- m.batch
	}
	close(m.in)
	<-m.done
	return m.err
}

package filecas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"

	"github.com/klauspost/compress/zstd"

	"snapflow/native/lazy/internal/pack"
)

// emitter writes each entry, in walk order, to the manifest and to the index's entry list, on a goroutine of its own:
// the reader goes on with the next files meanwhile. An index entry is its MessagePack tuple (what Encode writes for
// it); the list is compressed as it grows, into a zstd frame of its own that ends the index (indexFile.write puts
// the rest, and the list's length, before it), so the pass's end compresses only the head (packs and chunk table).
type emitter struct {
	pass *pack.Pass
	// chunkSha: the SHA-256 of the new index's chunk i (asked on the reader's goroutine, as add is)
	chunkSha func(i int) string
	in       chan []emitted
	batch    []emitted
	entries  bytes.Buffer // the compressed list
	z        *zstd.Encoder
	n        int
	err      error
	done     chan struct{}
	// lie: Options.Lie, until told
	lie bool
}

// emitted is an entry, whether its index tuple leaves its SHA-256 out (format.go, version 3: the manifest has it),
// and whether it goes into the index at all (a layer holds only what changed: layer.go).
type emitted struct {
	Entry
	elide   bool
	inIndex bool
}

const emitBatch = 256

func newEmitter(pass *pack.Pass, chunkSha func(i int) string, lie bool) (*emitter, error) {
	m := &emitter{pass: pass, chunkSha: chunkSha, in: make(chan []emitted, 16), done: make(chan struct{}), lie: lie}
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
			if m.err = m.pass.Add(&e.Entry.Entry); m.err != nil || !e.inIndex {
				continue
			}
			if e.elide {
				e.Sha256 = ""
			}
			if one, m.err = e.Entry.MarshalMsg(one[:0]); m.err != nil {
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

// add queues e (its chunk indexes final) for the manifest and, inIndex, the index.
func (m *emitter) add(e Entry, inIndex bool) {
	if m.lie && inIndex && e.Type == "file" && e.Size > 0 && e.Link == "" {
		m.lie = false
		sum := sha256.Sum256([]byte(e.Sha256))
		e.Sha256 = hex.EncodeToString(sum[:])
	}
	elide := oneChunkFile(&e) && e.Sha256 == m.chunkSha(e.Chunks[0])
	m.batch = append(m.batch, emitted{Entry: e, elide: elide, inIndex: inIndex})
	if len(m.batch) == emitBatch {
		m.in <- m.batch
		m.batch = make([]emitted, 0, emitBatch)
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

package czstd

import (
	"bytes"
	"errors"
	"math/rand"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// What the engine relies on: each EncodeAll is one frame any zstd reader decodes back, encoders share one Encoder
// at once, and with checksum a damaged frame is the reader's checksum error (a retryable transfer error upstream),
// not bytes that decode to other content.
func TestFramesDecodeCarryTheirChecksumAndShareTheEncoder(t *testing.T) {
	if !Native {
		t.Log("built without cgo: klauspost's encoder stands in")
	}
	enc, err := New(3, true, 8)
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := zstd.NewReader(nil)
	var wg sync.WaitGroup
	frames := make([][]byte, 8)
	inputs := make([][]byte, 8)
	for i := range frames {
		inputs[i] = make([]byte, i*100_000)
		rand.New(rand.NewSource(int64(i))).Read(inputs[i][:len(inputs[i])/3]) // part random, part zeros
		wg.Add(1)
		go func() {
			defer wg.Done()
			frames[i] = enc.EncodeAll(inputs[i], []byte("prefix"))
		}()
	}
	wg.Wait()
	var stream bytes.Buffer
	for i, f := range frames {
		if !bytes.HasPrefix(f, []byte("prefix")) {
			t.Fatalf("frame %d: dst's bytes were not kept", i)
		}
		stream.Write(f[len("prefix"):])
	}
	got, err := dec.DecodeAll(stream.Bytes(), nil)
	if err != nil || !bytes.Equal(got, bytes.Join(inputs, nil)) {
		t.Fatalf("the frames decoded to %d bytes (err %v), want the %d given", len(got), err, len(bytes.Join(inputs, nil)))
	}
	// The last frame's content checksum: flip a byte of a literal section deep inside the frame.
	last := append([]byte{}, frames[7][len("prefix"):]...)
	if last[4]&0x04 == 0 {
		t.Fatalf("frame header descriptor %#x: no content checksum flag", last[4])
	}
	last[len(last)-1] ^= 0xff // the last of the checksum's 4 bytes: the content decodes, the checksum differs
	if _, err := dec.DecodeAll(last, nil); !errors.Is(err, zstd.ErrCRCMismatch) {
		t.Fatalf("a frame with a damaged checksum decoded with %v, want %v", err, zstd.ErrCRCMismatch)
	}
}

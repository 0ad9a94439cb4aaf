package pack

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// The frames come out in input order, as one stream a zstd reader decodes back to the input, whatever the sizes.
func TestFramesDecodeToTheInputInOrder(t *testing.T) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(3))
	dec, _ := zstd.NewReader(nil)
	for _, size := range []int{0, 1, 1000, 4096, 4097, 50_000} {
		in := make([]byte, size)
		rand.New(rand.NewSource(int64(size))).Read(in[:size/2]) // half random, half zeros: frames of unequal output
		var out bytes.Buffer
		w := newFrameWriter(&out, enc, 4096, 3)
		for p := in; len(p) > 0; {
			n := min(len(p), 777)
			if _, err := w.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := dec.DecodeAll(out.Bytes(), nil)
		if err != nil || !bytes.Equal(got, in) {
			t.Fatalf("size %d: decoded %d bytes (err %v), want the %d written", size, len(got), err, size)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A failed write of the output fails the writer: a later Write or the Close says so.
func TestFramesReportTheOutputsFailure(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	w := newFrameWriter(failingWriter{}, enc, 1024, 2)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = w.Write(bytes.Repeat([]byte{byte(i)}, 1024))
	}
	if cerr := w.Close(); err == nil && cerr == nil {
		t.Fatal("a failing output went unreported")
	}
}

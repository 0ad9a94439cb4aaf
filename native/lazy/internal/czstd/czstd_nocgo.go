//go:build !cgo

package czstd

import "github.com/klauspost/compress/zstd"

// Native says whether New's encoder is zstd's C library (a cgo build) or klauspost's.
const Native = false

// Version: no C library in this build.
func Version() string { return "" }

// New is klauspost's encoder at the nearest level (its EncodeAll is safe for up to concurrency calls at once).
func New(level int, checksum bool, concurrency int) (Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderCRC(checksum), zstd.WithEncoderConcurrency(concurrency))
}

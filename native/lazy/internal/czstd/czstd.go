// Package czstd compresses a whole input into one zstd frame with zstd's own C library (the reference
// implementation, compiled from the sources github.com/DataDog/zstd vendors: the same version wherever the engine is
// built), for the default backup's archive frames (pack/frames.go).
//
// Why: on the npm workspace's 504 MB tar, 8 MiB frames at level 3, klauspost's pure-Go EncodeAll took 2.03 CPU-s and
// the C library 1.61–1.62 (0.82 s on two workers, 122.6 MB against 120.6 MB); the default backup is CPU-bound on two
// cores, so that is ~0.2 s of its wall time (issue 23, session 22's measurements; again in session 23: 2.85–3.53 s
// against 3.92–4.16 s on one core of a slower day). DataDog's Go API cannot ask for the frame checksum, which the
// engine keeps on purpose (a damaged archive must be zstd's retryable error, not a file's permanent SHA-256
// mismatch: faults-integration), so this package calls ZSTD_compress2 with its parameters itself. Without cgo
// (CGO_ENABLED=0) New answers klauspost's encoder instead: same frames, same checksum, more CPU.
package czstd

// Encoder compresses src into one frame appended to dst; safe for concurrent use.
type Encoder interface {
	EncodeAll(src, dst []byte) []byte
}

package fetch

import "fmt"

// ChunkMissing: the store answered 404, or no URL is known for the chunk. Not retried: R2 is strongly consistent.
type ChunkMissing struct{ SHA256, Why string }

func (e *ChunkMissing) Error() string { return fmt.Sprintf("chunk %s missing: %s", e.SHA256, e.Why) }

// ChunkInvalid: the bytes received do not hash to the chunk's name. Retried (a proxy may have mangled them); never served.
type ChunkInvalid struct {
	SHA256, Got string
	Size        int64
}

func (e *ChunkInvalid) Error() string {
	return fmt.Sprintf("chunk %s invalid: got sha256 %s over %d bytes", e.SHA256, e.Got, e.Size)
}

// permanent reports whether retrying err cannot help.
func permanent(err error) bool {
	_, missing := err.(*ChunkMissing)
	return missing
}

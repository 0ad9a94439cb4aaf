package index

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	fastcdc "github.com/jotfs/fastcdc-go"
)

// DefaultAvgChunk is the average chunk size (see MEASUREMENTS.md: 512 KiB keeps the chunk count of a 200 MB image
// near 350 while a first use still fetches a few percent of it).
const DefaultAvgChunk = 512 << 10

// Build cuts r into FastCDC chunks of average size avg (min avg/4, max avg*4) and hashes every chunk and the whole
// stream in the same single read, so indexing costs one pass over the image.
func Build(r io.Reader, avg int) (*Index, error) {
	if avg < 1024 || avg&(avg-1) != 0 {
		return nil, fmt.Errorf("average chunk size %d: want a power of two ≥ 1 KiB", avg)
	}
	// Seed stays 0: fastcdc-go XORs its global table with the seed, and chunk boundaries must never change between
	// versions or every chunk would be uploaded again.
	c, err := fastcdc.NewChunker(r, fastcdc.Options{AverageSize: avg, MinSize: avg / 4, MaxSize: avg * 4, BufSize: avg * 8})
	if err != nil {
		return nil, err
	}
	whole := sha256.New()
	idx := &Index{Version: Version, AvgChunk: avg, Chunks: []Chunk{}}
	for {
		ch, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(ch.Data)
		whole.Write(ch.Data)
		idx.Chunks = append(idx.Chunks, Chunk{SHA256: hex.EncodeToString(sum[:]), Offset: int64(ch.Offset), Size: int64(ch.Length)})
		idx.Size += int64(ch.Length)
	}
	idx.SHA256 = hex.EncodeToString(whole.Sum(nil))
	return idx, nil
}

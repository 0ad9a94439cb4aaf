package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"snapflow/native/lazy/internal/cache"
	"snapflow/native/lazy/internal/index"
)

type verifyResult struct {
	OK      bool     `json:"ok"`
	Chunks  int      `json:"chunks"`
	Missing int      `json:"missing"`
	Bad     []string `json:"bad"`
	SHA256  string   `json:"sha256"`
}

// verifyCmd hashes every chunk — from the cache or from an image file (e.g. the mounted one) — and the whole image,
// and compares them with the index. Exit status 1 when anything differs.
func verifyCmd(args []string) error {
	fs := newFlags("verify")
	indexPath := fs.String("index", "", "index file")
	cacheDir := fs.String("cache", "", "chunk cache directory")
	image := fs.String("image", "", "image file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "index"); err != nil {
		return err
	}
	if (*cacheDir == "") == (*image == "") {
		return fmt.Errorf("give exactly one of --cache and --image")
	}
	idx, err := index.Load(*indexPath)
	if err != nil {
		return err
	}
	read, closeFn, err := chunkReader(*cacheDir, *image)
	if err != nil {
		return err
	}
	defer closeFn()
	res := verifyResult{Bad: []string{}}
	whole := sha256.New()
	buf := make([]byte, 0, idx.AvgChunk*4)
	for _, c := range idx.Chunks {
		if int64(cap(buf)) < c.Size {
			buf = make([]byte, c.Size)
		}
		buf = buf[:c.Size]
		res.Chunks++
		if err := read(c, buf); err != nil {
			res.Missing++
			continue
		}
		sum := sha256.Sum256(buf)
		if hex.EncodeToString(sum[:]) != c.SHA256 {
			res.Bad = append(res.Bad, c.SHA256)
		}
		whole.Write(buf)
	}
	res.SHA256 = hex.EncodeToString(whole.Sum(nil))
	res.OK = res.Missing == 0 && len(res.Bad) == 0 && res.SHA256 == idx.SHA256
	if err := printJSON(res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("image does not match the index")
	}
	return nil
}

func chunkReader(cacheDir, image string) (func(index.Chunk, []byte) error, func(), error) {
	if cacheDir != "" {
		d, err := cache.Open(cacheDir)
		if err != nil {
			return nil, nil, err
		}
		return func(c index.Chunk, p []byte) error { return d.ReadAt(c.SHA256, p, 0) }, func() {}, nil
	}
	f, err := os.Open(image)
	if err != nil {
		return nil, nil, err
	}
	return func(c index.Chunk, p []byte) error { _, err := f.ReadAt(p, c.Offset); return err }, func() { f.Close() }, nil
}

package main

import (
	"bufio"
	"encoding/json"
	"os"

	"snapflow/native/lazy/internal/index"
)

// chunkCmd indexes an image in one read and writes the index JSON to stdout.
func chunkCmd(args []string) error {
	fs := newFlags("chunk")
	image := fs.String("image", "", "image file to index")
	avg := byteSize(index.DefaultAvgChunk)
	fs.Var(&avg, "avg", "average chunk size (power of two)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "image"); err != nil {
		return err
	}
	f, err := os.Open(*image)
	if err != nil {
		return err
	}
	defer f.Close()
	idx, err := index.Build(f, int(avg))
	if err != nil {
		return err
	}
	// A squashfs image's tables, named in the index so that a restore can sign their chunks' URLs first.
	sb := make([]byte, 96)
	if n, _ := f.ReadAt(sb, 0); n == len(sb) {
		if t, ok := index.SquashfsTables(sb, idx.Size); ok {
			idx.Tables = &t
		}
	}
	w := bufio.NewWriter(os.Stdout)
	if err := json.NewEncoder(w).Encode(idx); err != nil {
		return err
	}
	return w.Flush()
}

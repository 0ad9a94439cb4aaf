package main

import (
	"context"
	"os"
	"time"

	"snapflow/native/lazy/internal/index"
	"snapflow/native/lazy/internal/upload"
	"snapflow/native/lazy/internal/urlfile"
)

// uploadCmd PUTs the chunks listed in the URL file and prints {"chunks","bytes","retries","ms"}.
func uploadCmd(args []string) error {
	fs := newFlags("upload")
	image := fs.String("image", "", "image file")
	urls := fs.String("urls", "", `JSON file {"<sha256>":"<presigned PUT url>"}; only these chunks are sent`)
	indexPath := fs.String("index", "", "index of the image (default: index it again, with --avg)")
	avg := byteSize(index.DefaultAvgChunk)
	fs.Var(&avg, "avg", "average chunk size when indexing again")
	concurrency := fs.Int("concurrency", 8, "parallel PUTs")
	retries := fs.Int("retries", 4, "retries per chunk")
	timeout := fs.Duration("timeout", 60*time.Second, "deadline per PUT attempt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "image", "urls"); err != nil {
		return err
	}
	u, err := urlfile.Open(*urls)
	if err != nil {
		return err
	}
	var idx *index.Index
	if *indexPath != "" {
		idx, err = index.Load(*indexPath)
	} else {
		idx, err = indexFile(*image, int(avg))
	}
	if err != nil {
		return err
	}
	res, err := upload.Run(context.Background(), *image, idx, u, upload.Options{Concurrency: *concurrency, Retries: *retries, Timeout: *timeout})
	if err != nil {
		return err
	}
	return printJSON(res)
}

func indexFile(path string, avg int) (*index.Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return index.Build(f, avg)
}

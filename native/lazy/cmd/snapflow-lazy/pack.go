package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"snapflow/native/lazy/internal/pack"
)

// packRequest is pack's stdin: the archive's zstd settings and the selection as the agent compiled it; with delta,
// the pass is a delta against that base (internal/pack/delta.go).
type packRequest struct {
	Level     int             `json:"level"`
	Threads   int             `json:"threads"`
	Long      bool            `json:"long"`
	Selection *pack.Selection `json:"selection"`
	Delta     *pack.Delta     `json:"delta"`
	// upload mode (--part-size): urls[i] is the presigned UploadPart URL of part i + 1. On stdin, never on argv (a
	// URL is a credential: ps and logs show argv).
	URLs []string `json:"urls"`
	// test-only (the agent's faults.ts arms it): part 1 changed after it was hashed (packupload.go)
	Lie bool `json:"lie"`
}

// packCmd makes a tree's zstd-compressed tar archive (stdout, or --out) and its manifest (--manifest) in one pass
// (internal/pack). The result, or {"error": {code, message, field}} when it failed, goes to --result-fd (or stderr):
// stdout is the archive. With --part-size the archive goes to the store instead, cut into parts PUT to the presigned
// URLs of the request (packupload.go), and the result lists the parts.
func packCmd(args []string) error {
	fs := newFlags("pack")
	root := fs.String("root", "", "the tree to pack")
	manifest := fs.String("manifest", "", "where the manifest JSON is written")
	outPath := fs.String("out", "", "write the archive here instead of stdout")
	resultFd := fs.Int("result-fd", 2, "the descriptor the result JSON is written to")
	partSize := fs.Int("part-size", 0, "upload mode: bytes of every part but the last (the request's urls, one per part)")
	concurrency := fs.Int("concurrency", 4, "upload mode: parts PUT at once")
	retries := fs.Int("retries", 2, "upload mode: extra attempts per part on a network error, 5xx or 429")
	timeout := fs.Duration("timeout", 120*time.Second, "upload mode: deadline per PUT attempt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "root", "manifest"); err != nil {
		return err
	}
	var req packRequest
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("stdin: %w", err)
	}
	if req.Level < -7 || req.Level > 22 || req.Threads < 0 {
		return fmt.Errorf("stdin: level %d or threads %d out of range", req.Level, req.Threads)
	}
	resultOut := os.NewFile(uintptr(*resultFd), "result")
	// Stopped (the agent's reader went away and it sends SIGTERM): leave neither a half manifest nor a half archive.
	// SIGPIPE is caught too, so a closed stdout fails the write (and the pass cleans up) instead of killing the process.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGPIPE)
	go func() {
		for sig := range stop {
			if sig == syscall.SIGPIPE {
				continue
			}
			os.Remove(pack.TempManifest(*manifest))
			if req.Delta != nil && req.Delta.Keep != "" {
				os.Remove(pack.TempManifest(req.Delta.Keep))
			}
			if *outPath != "" {
				os.Remove(*outPath)
			}
			os.Exit(1)
		}
	}()
	if req.Delta != nil {
		collectOnlyNear(incrementalHeap)
	}
	if *partSize > 0 {
		return packUpload(pack.Options{Root: *root, Manifest: *manifest, Level: req.Level, Threads: req.Threads, Long: req.Long, Selection: req.Selection}, req.Delta,
			uploadSettings{partSize: *partSize, concurrency: *concurrency, retries: *retries, timeout: *timeout, urls: req.URLs, lie: req.Lie}, resultOut)
	}
	if len(req.URLs) > 0 || req.Lie {
		return errors.New("stdin: urls and lie need --part-size")
	}
	var out io.Writer = os.Stdout
	if *outPath != "" {
		f, err := os.Create(*outPath)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	w := bufio.NewWriterSize(out, 256<<10)
	opts := pack.Options{Root: *root, Manifest: *manifest, Level: req.Level, Threads: req.Threads, Long: req.Long, Selection: req.Selection}
	var result any
	var err error
	if req.Delta != nil {
		result, err = pack.RunDelta(opts, *req.Delta, w)
	} else {
		result, err = pack.Run(opts, w)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		var known *pack.Error
		if !errors.As(err, &known) {
			known = &pack.Error{Code: "tool_failed", Message: err.Error()}
		}
		json.NewEncoder(resultOut).Encode(map[string]any{"error": known})
		if *outPath != "" {
			os.Remove(*outPath)
		}
		return err
	}
	return json.NewEncoder(resultOut).Encode(result)
}

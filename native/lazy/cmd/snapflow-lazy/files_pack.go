package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/pack"
	"snapflow/native/lazy/internal/partupload"
)

// filesPackRequest is files-pack's stdin (internal/filecas pack.go).
type filesPackRequest struct {
	Name      string              `json:"name"`
	AvgChunk  int                 `json:"avgChunk"`
	Level     int                 `json:"level"`
	Selection *pack.Selection     `json:"selection"`
	Base      *filecas.BaseSource `json:"base"`
	// Layer: over a base, write the index as a layer over it (internal/filecas layer.go) when the base allows;
	// StatsOut: where the tree's own lstat keys go when the layer keeps its parent's (stats.go).
	Layer    bool   `json:"layer"`
	StatsOut string `json:"statsOut"`
	// urls[i]: the presigned UploadPart URL of the pack's part i + 1. On stdin, never on argv (a URL is a credential).
	URLs []string `json:"urls"`
	// Lie is a test-only fault (the agent arms it through its faults.ts, never in production): a compromised
	// source's index and manifest, one file's SHA-256 not its content's (filecas Options.Lie).
	Lie bool `json:"lie"`
}

// filesPackResult is the pass's result and the pack's parts, which the Worker completes the upload with.
type filesPackResult struct {
	filecas.Result
	Parts             []partupload.Part `json:"parts"`
	PeakBufferedBytes int64             `json:"peakBufferedBytes"`
	Retries           int               `json:"retries"`
}

// filesPackCmd is the file-level backup (internal/filecas): the manifest (--manifest), the index (--index) and the
// pack of the new chunks, PUT in parts to the request's URLs as it fills (--part-size), or written to --out. The
// result, or {"error": {code, message, field}}, goes to --result-fd.
func filesPackCmd(args []string) error {
	fs := newFlags("files-pack")
	root := fs.String("root", "", "the tree to back up")
	manifest := fs.String("manifest", "", "where the manifest JSON is written (absent: none is; its size and SHA-256 are still answered, and files-manifest makes it from the index)")
	index := fs.String("index", "", "where the index (zstd JSON) is written")
	outPath := fs.String("out", "", "write the pack to this file instead of PUTting it in parts")
	resultFd := fs.Int("result-fd", 2, "the descriptor the result JSON is written to")
	partSize := fs.Int("part-size", 0, "bytes of every part but the last (the request's urls, one per part)")
	concurrency := fs.Int("concurrency", 4, "parts PUT at once")
	retries := fs.Int("retries", 2, "extra attempts per part (and the base's GET) on a network error, 5xx or 429")
	timeout := fs.Duration("timeout", 120*time.Second, "deadline per PUT (and GET) attempt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "root", "index"); err != nil {
		return err
	}
	if (*partSize > 0) == (*outPath != "") {
		return errors.New("give one of --part-size (the pack PUT in parts) and --out")
	}
	var req filesPackRequest
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	if req.Level < -7 || req.Level > 22 {
		return fmt.Errorf("stdin: level %d out of range", req.Level)
	}
	if req.Base != nil {
		req.Base.Timeout, req.Base.Retries = *timeout, *retries
		collectOnlyNear(incrementalHeap)
	}
	resultOut := os.NewFile(uintptr(*resultFd), "result")
	// Stopped: leave neither the manifest nor the index (nor a pack file); the upload is the Worker's to abort.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		if *manifest != "" {
			os.Remove(pack.TempManifest(*manifest))
		}
		os.Remove(pack.TempManifest(*index))
		if *outPath != "" {
			os.Remove(*outPath)
		}
		os.Exit(1)
	}()
	opts := filecas.Options{Root: *root, Manifest: *manifest, Index: *index, Name: req.Name, AvgChunk: req.AvgChunk, Level: req.Level, Selection: req.Selection, Base: req.Base, Layer: req.Layer, Stats: req.StatsOut, Lie: req.Lie}
	var res filesPackResult
	var err error
	if *outPath != "" {
		if len(req.URLs) > 0 {
			return errors.New("stdin: urls need --part-size")
		}
		res, err = filesPackToFile(opts, *outPath)
	} else {
		res, err = filesPackUpload(opts, uploadSettings{partSize: *partSize, concurrency: *concurrency, retries: *retries, timeout: *timeout, urls: req.URLs})
	}
	if err != nil {
		json.NewEncoder(resultOut).Encode(map[string]any{"error": uploadFailure(err)})
		return err
	}
	return json.NewEncoder(resultOut).Encode(res)
}

func filesPackToFile(opts filecas.Options, path string) (filesPackResult, error) {
	f, err := os.Create(path)
	if err != nil {
		return filesPackResult{}, err
	}
	w := &fileSink{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	r, err := filecas.Backup(opts, w)
	if err != nil {
		f.Close()
		os.Remove(path)
		return filesPackResult{}, err
	}
	return filesPackResult{Result: r, Parts: []partupload.Part{}}, nil
}

type fileSink struct {
	f *os.File
	w *bufio.Writer
}

func (s *fileSink) Write(b []byte) (int, error) { return s.w.Write(b) }

func (s *fileSink) Close() error {
	if err := s.w.Flush(); err != nil {
		s.f.Close()
		return err
	}
	return s.f.Close()
}

func filesPackUpload(opts filecas.Options, u uploadSettings) (filesPackResult, error) {
	if len(u.urls) == 0 {
		return filesPackResult{}, &pack.Error{Code: "bad_request", Field: "urls", Message: "urls: the pack's part URLs are needed"}
	}
	if u.partSize < minPartSize {
		return filesPackResult{}, &pack.Error{Code: "bad_request", Field: "partSize", Message: fmt.Sprintf("partSize: %d is below the store's least part size, %d", u.partSize, minPartSize)}
	}
	s := &partsSink{o: partupload.Options{PartSize: u.partSize, Concurrency: u.concurrency, URLs: u.urls, Retries: u.retries, Timeout: u.timeout}}
	r, err := filecas.Backup(opts, s)
	if err != nil {
		if s.w != nil {
			s.w.Abort()
			// A write the upload refused reaches the pass through its framer: the upload's own error says why.
			if cause := s.w.Err(); cause != nil {
				return filesPackResult{}, cause
			}
		}
		return filesPackResult{}, err
	}
	res := filesPackResult{Result: r, Parts: s.up.Parts, PeakBufferedBytes: s.up.PeakBufferedBytes, Retries: s.up.Retries}
	if res.Parts == nil {
		res.Parts = []partupload.Part{}
	}
	if r.Pack != nil && s.up.Bytes != r.Pack.Bytes {
		return filesPackResult{}, fmt.Errorf("the pack is %d bytes; %d were cut into parts", r.Pack.Bytes, s.up.Bytes)
	}
	return res, nil
}

// partsSink starts the upload with the pack's first byte: a pass with no new chunk PUTs nothing.
type partsSink struct {
	o  partupload.Options
	w  *partupload.Writer
	up partupload.Result
}

func (s *partsSink) Write(b []byte) (int, error) {
	if s.w == nil {
		w, err := partupload.New(context.Background(), s.o)
		if err != nil {
			return 0, err
		}
		s.w = w
	}
	return s.w.Write(b)
}

func (s *partsSink) Close() (err error) {
	if s.w == nil {
		return nil
	}
	s.up, err = s.w.Close()
	return err
}

var _ io.WriteCloser = (*partsSink)(nil)

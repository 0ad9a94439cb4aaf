package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/unpack"
)

// unpackRequest is unpack's first line on stdin (container/extract/engine-unpack.ts): where the archive and the
// manifest are, and how the restore is checked. Without a URL the archive follows that line on stdin.
type unpackRequest struct {
	URL         string                `json:"url"`
	IdleSeconds int                   `json:"idleSeconds"`
	Retries     int                   `json:"retries"`
	Manifest    unpack.ManifestSource `json:"manifest"`
	// Field names the manifest in errors (the agent's request field, e.g. "extract.expected").
	Field            string `json:"field"`
	MaxManifestBytes int64  `json:"maxManifestBytes"`
	KeepOwners       bool   `json:"keepOwners"`
	Complete         bool   `json:"complete"`
	// Walk: read the made tree back and compare its metadata (the agent moves it whole into an empty target)
	Walk  bool `json:"walk"`
	Limit int  `json:"limit"`
	// Unchecked: no manifest (an overlay delta's layer: the agent checks the archive's SHA-256 against its record);
	// then neither manifest, complete nor walk may be given.
	Unchecked bool `json:"unchecked"`
}

// unpackResult is unpack.Result with what the download did.
type unpackResult struct {
	*unpack.Result
	Attempts   int            `json:"attempts"`
	ManifestMs int64          `json:"manifestMs"`
	Walked     *unpack.Walked `json:"walked,omitempty"`
}

// unpackCmd is the default restore's engine (internal/unpack): a tar.zst from a presigned URL (or stdin) made into a
// tree beneath --root, checked against its manifest on the way. The result, or {"error": {code, message, field}},
// goes to --result-fd (or stderr).
func unpackCmd(args []string) error {
	fs := newFlags("unpack")
	root := fs.String("root", "", "the empty staging directory the tree is made in")
	resultFd := fs.Int("result-fd", 2, "the descriptor the result JSON is written to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "root"); err != nil {
		return err
	}
	resultOut := os.NewFile(uintptr(*resultFd), "result")
	answerError := func(err error) error { return writeErrorAnswer(resultOut, err) }
	stdin := bufio.NewReaderSize(os.Stdin, 1<<20)
	var req unpackRequest
	if err := readRequestLine(stdin, &req); err != nil {
		return answerError(err)
	}
	if req.MaxManifestBytes <= 0 || req.IdleSeconds <= 0 || req.Retries < 0 {
		return answerError(&unpack.Error{Code: "bad_request", Message: "stdin: maxManifestBytes and idleSeconds must be positive, retries not negative"})
	}
	if req.Field == "" {
		req.Field = "expected"
	}
	if req.Unchecked && (req.Manifest != (unpack.ManifestSource{}) || req.Complete || req.Walk) {
		return answerError(&unpack.Error{Code: "bad_request", Message: "stdin: unchecked takes no manifest, complete or walk", Field: "unchecked"})
	}
	// The modes the archive gives are the modes made: no umask between them.
	unix.Umask(0)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	idle := time.Duration(req.IdleSeconds) * time.Second

	started := time.Now()
	type loaded struct {
		x   *unpack.Expected
		ms  int64
		err error
	}
	manifest := make(chan loaded, 1)
	go func() {
		if req.Unchecked {
			manifest <- loaded{x: unpack.NewExpected(nil)}
			return
		}
		get := func(url string) (io.ReadCloser, error) { return getManifest(ctx, url, req.Field, idle) }
		x, err := unpack.LoadManifest(req.Manifest, req.Field, req.MaxManifestBytes, get)
		manifest <- loaded{x, time.Since(started).Milliseconds(), err}
	}()
	var archive io.Reader = stdin
	download := (*unpack.Download)(nil)
	if req.URL != "" {
		download = unpack.NewDownload(ctx, req.URL, idle, req.Retries)
		defer download.Close()
		archive = download
	}
	var manifestMs int64
	var expected *unpack.Expected
	result, err := unpack.Run(ctx, archive, func() (*unpack.Expected, error) {
		got := <-manifest
		manifestMs, expected = got.ms, got.x
		return got.x, got.err
	}, unpack.Options{Root: *root, KeepOwners: req.KeepOwners, Complete: req.Complete, Limit: req.Limit, Unchecked: req.Unchecked})
	if err != nil {
		return answerError(err)
	}
	out := unpackResult{Result: result, ManifestMs: manifestMs}
	if req.Walk && result.Equal {
		limit := req.Limit
		if limit <= 0 {
			limit = 20
		}
		if out.Walked, err = unpack.Walk(*root, expected, req.KeepOwners, limit); err != nil {
			return answerError(err)
		}
	}
	if download != nil {
		out.Attempts = download.Attempts
	}
	return json.NewEncoder(resultOut).Encode(out)
}

// getManifest GETs the manifest's presigned URL: a 404 is not_found, as the agent's loadManifest answers it.
func getManifest(ctx context.Context, url, field string, idle time.Duration) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*idle)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, &unpack.Error{Code: "bad_request", Message: field + ".url: " + err.Error(), Field: field + ".url"}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, &unpack.Error{Code: "tool_failed", Message: fmt.Sprintf("%s.url: GET failed: %v", field, err)}
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		code := "tool_failed"
		if resp.StatusCode == http.StatusNotFound {
			code = "not_found"
		}
		return nil, &unpack.Error{Code: code, Message: fmt.Sprintf("%s.url: GET answered %d", field, resp.StatusCode), Field: field + ".url"}
	}
	return &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"syscall"
	"time"

	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/pack"
)

// filesManifestRequest is files-manifest's one stdin line (container/manifest/manifest-from-index.ts): the index,
// and the selection record files-pack answered for it (its record keeps it).
type filesManifestRequest struct {
	Index       indexSource  `json:"index"`
	Selection   *pack.Record `json:"selection"`
	IdleSeconds int          `json:"idleSeconds"`
	Retries     int          `json:"retries"`
}

type filesManifestResult struct {
	pack.Summary
	IndexMs int64 `json:"indexMs"`
	Ms      int64 `json:"ms"`
}

// filesManifestCmd writes a file-level snapshot's manifest, made from its index (read as files-unpack reads it:
// bounded, SHA-256 checked, validated), to --out: what files-pack wrote beside the index, byte for byte, so the
// reader checks it against the SHA-256 the snapshot's record keeps. The result (the manifest's size, SHA-256 and
// totals), or {"error": {code, message, field}}, goes to --result-fd; on failure nothing is left at --out.
func filesManifestCmd(args []string) error {
	fs := newFlags("files-manifest")
	out := fs.String("out", "", "where the manifest is written (named only once whole)")
	resultFd := fs.Int("result-fd", 2, "the descriptor the result JSON is written to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "out"); err != nil {
		return err
	}
	resultOut := os.NewFile(uintptr(*resultFd), "result")
	answerError := func(err error) error { return writeErrorAnswer(resultOut, err) }
	var req filesManifestRequest
	if err := readRequestLine(bufio.NewReaderSize(os.Stdin, 1<<20), &req); err != nil {
		return answerError(err)
	}
	if req.IdleSeconds <= 0 || req.Retries < 0 {
		return answerError(&filecas.Error{Code: "bad_request", Message: "stdin: idleSeconds must be positive, retries not negative"})
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	started := time.Now()
	x, err := readIndex(ctx, req.Index, req.Retries, time.Duration(req.IdleSeconds)*time.Second)
	if err != nil {
		return answerError(err)
	}
	indexMs := time.Since(started).Milliseconds()
	made, err := x.WriteManifest(*out, req.Selection)
	if err != nil {
		return answerError(err)
	}
	return json.NewEncoder(resultOut).Encode(filesManifestResult{Summary: made, IndexMs: indexMs, Ms: time.Since(started).Milliseconds()})
}

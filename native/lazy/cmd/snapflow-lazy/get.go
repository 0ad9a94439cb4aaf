package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/unpack"
)

// getRequest is get's stdin line (container/transfer/engine-get.ts): the presigned URL travels here, never in argv.
type getRequest struct {
	URL         string `json:"url"`
	IdleSeconds int    `json:"idleSeconds"`
	Retries     int    `json:"retries"`
}

type getResult struct {
	Bytes    int64  `json:"bytes"`
	Sha256   string `json:"sha256"`
	Ms       int64  `json:"ms"`
	Attempts int    `json:"attempts"`
}

// getCmd downloads one presigned URL to --out, hashing it on the way, in one process: an image restore's transfer
// (presigned-file). The agent's own download (fetch → a hashing stream → a file) cost Node 0.5 CPU-s and ~0.45 s for
// a 121 MB object served locally, this 0.15 CPU-s and ~0.2 s (native/lazy/MEASUREMENTS.md "get").
// A break resumes by Range and a silent store is abandoned (unpack.Download). The file is written beside --out and
// renamed onto it once whole: a failed download leaves no part of itself and whatever --out was.
func getCmd(args []string) error {
	fs := newFlags("get")
	out := fs.String("out", "", "the file the object is written to (replaced once the download is whole)")
	resultFd := fs.Int("result-fd", 2, "the descriptor the result JSON is written to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "out"); err != nil {
		return err
	}
	resultOut := os.NewFile(uintptr(*resultFd), "result")
	answerError := func(err error) error { return writeErrorAnswer(resultOut, err) }
	var req getRequest
	if err := readRequestLine(bufio.NewReader(os.Stdin), &req); err != nil {
		return answerError(err)
	}
	if req.URL == "" || req.IdleSeconds <= 0 || req.Retries < 0 {
		return answerError(&unpack.Error{Code: "bad_request", Message: "stdin: url and a positive idleSeconds are required, retries not negative"})
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	started := time.Now()
	d := unpack.NewDownload(ctx, req.URL, time.Duration(req.IdleSeconds)*time.Second, req.Retries)
	defer d.Close()
	n, sum, err := writeWhole(*out, d)
	if err != nil {
		return answerError(err)
	}
	return json.NewEncoder(resultOut).Encode(getResult{Bytes: n, Sha256: sum, Ms: time.Since(started).Milliseconds(), Attempts: d.Attempts})
}

// writeWhole copies r into a temporary file beside path, hashing it, and renames it onto path once r has ended.
func writeWhole(path string, r io.Reader) (int64, string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, "", err
	}
	// A name of its own, made here and now: whatever stands at it (a link planted in the sandbox's directory) is
	// refused, not followed; the rename then replaces path itself, never what a link there points to.
	tmp := fmt.Sprintf("%s.get-%d", path, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	w := &writingBack{f: f}
	n, err := io.CopyBuffer(io.MultiWriter(w, h), r, make([]byte, 1<<20))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// writingBack starts the kernel writing each 8 MiB to disk as soon as it is written (sync_file_range, asynchronous: it
// waits for nothing). Mounting an image through a loop device first writes back every dirty page of its file: a
// freshly downloaded 140 MB squashfs took 66-79 ms to mount against 4-5 ms once the pages were clean, and the copy
// itself took no longer with the writeback started along the way (native/lazy/MEASUREMENTS.md "get").
type writingBack struct {
	f           *os.File
	off, synced int64
}

const writebackEvery = 8 << 20

func (w *writingBack) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.synced >= writebackEvery {
		// Advisory: a filesystem without it (or an error) only leaves the writeback to the kernel's own pace.
		_ = unix.SyncFileRange(int(w.f.Fd()), w.synced, w.off-w.synced, unix.SYNC_FILE_RANGE_WRITE)
		w.synced = w.off
	}
	return n, err
}

// Close starts the writeback of the tail and closes the file.
func (w *writingBack) Close() error {
	if w.off > w.synced {
		_ = unix.SyncFileRange(int(w.f.Fd()), w.synced, w.off-w.synced, unix.SYNC_FILE_RANGE_WRITE)
	}
	return w.f.Close()
}

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/unpack"
)

// filesUnpackRequest is files-unpack's one stdin line (container/extract/engine-files-unpack.ts): where the index and
// the packs are, and how the restore runs. URLs come here, never in argv.
type filesUnpackRequest struct {
	Index       indexSource       `json:"index"`
	Packs       map[string]string `json:"packs"`
	KeepOwners  bool              `json:"keepOwners"`
	Walk        bool              `json:"walk"`
	IdleSeconds int               `json:"idleSeconds"`
	Retries     int               `json:"retries"`
	Concurrency int               `json:"concurrency"`
	Limit       int               `json:"limit"`
	// Manifest: the snapshot's manifest (a presigned URL and the SHA-256 its record keeps), which every index entry
	// must agree with before anything is made (filecas.Agree); MaxManifestBytes bounds it.
	Manifest         *unpack.ManifestSource `json:"manifest"`
	MaxManifestBytes int64                  `json:"maxManifestBytes"`
	// StatsOut: where the made tree's stat keys go (filecas/stats.go), so that the next backup here reads only what
	// changed since; needs index.sha256 (the keys are bound to the index they were restored from).
	StatsOut string `json:"statsOut"`
}

type filesUnpackResult struct {
	*filecas.UnpackResult
	IndexMs int64 `json:"indexMs"`
	// Stats: files whose stat keys were written to statsOut
	Stats *int `json:"stats,omitempty"`
	// ManifestAgreed: every index entry agreed with the manifest's (request.manifest), checked before anything was made
	ManifestAgreed bool `json:"manifestAgreed,omitempty"`
}

// filesUnpackCmd is the extract restore of the file-level format (internal/filecas Unpack): the index read (a
// sandbox file or a presigned URL, bounded, SHA-256 checked when given) and decoded, validated, before anything is
// made; then the tree beneath --root, each chunk checked against its name before it is written, each file against
// its entry. The result, or {"error": {code, message, field}}, goes to --result-fd. On any failure --root holds a
// partial tree: the caller discards it (it is a staging directory).
func filesUnpackCmd(args []string) error {
	fs := newFlags("files-unpack")
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
	var req filesUnpackRequest
	if err := readRequestLine(bufio.NewReaderSize(os.Stdin, 1<<20), &req); err != nil {
		return answerError(err)
	}
	if req.IdleSeconds <= 0 || req.Retries < 0 || req.Concurrency < 0 {
		return answerError(&filecas.Error{Code: "bad_request", Message: "stdin: idleSeconds must be positive, retries and concurrency not negative"})
	}
	// The modes the index gives are the modes made: no umask between them.
	unix.Umask(0)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	idle := time.Duration(req.IdleSeconds) * time.Second

	started := time.Now()
	x, err := readIndex(ctx, req.Index, req.Retries, idle)
	if err != nil {
		return answerError(err)
	}
	if req.Manifest != nil {
		if req.MaxManifestBytes <= 0 {
			return answerError(&filecas.Error{Code: "bad_request", Field: "maxManifestBytes", Message: "maxManifestBytes: must be positive with a manifest"})
		}
		get := func(url string) (io.ReadCloser, error) { return getManifest(ctx, url, "manifest", idle) }
		m, err := unpack.LoadManifest(*req.Manifest, "manifest", req.MaxManifestBytes, get)
		if err != nil {
			return answerError(err)
		}
		if err := filecas.Agree(x, m); err != nil {
			return answerError(err)
		}
	}
	indexMs := time.Since(started).Milliseconds()
	res, err := filecas.Unpack(ctx, x, filecas.UnpackOptions{
		Root: *root, Packs: req.Packs, KeepOwners: req.KeepOwners, Walk: req.Walk,
		Idle: idle, Retries: req.Retries, Concurrency: req.Concurrency, Limit: req.Limit,
	})
	if err != nil {
		return answerError(err)
	}
	out := filesUnpackResult{UnpackResult: res, IndexMs: indexMs, ManifestAgreed: req.Manifest != nil}
	if req.StatsOut != "" && req.Index.Sha256 != "" && res.Equal {
		n, err := filecas.WriteStats(*root, x, req.Index.Sha256, req.StatsOut)
		if err != nil {
			return answerError(fmt.Errorf("statsOut: %w", err))
		}
		out.Stats = &n
	}
	return json.NewEncoder(resultOut).Encode(out)
}

// indexSource is where an index is: a sandbox file or a presigned URL, and the SHA-256 its record keeps.
type indexSource struct {
	File   string `json:"file"`
	URL    string `json:"url"`
	Sha256 string `json:"sha256"`
}

// readIndex reads the whole index object (so its SHA-256 is of every byte), decodes and validates it within
// filecas.DefaultLimits, and compares the SHA-256 when the source gives one.
func readIndex(ctx context.Context, src indexSource, retries int, idle time.Duration) (*filecas.Index, error) {
	var body io.ReadCloser
	switch {
	case src.File != "":
		f, err := os.Open(src.File)
		if errors.Is(err, os.ErrNotExist) {
			return nil, &filecas.Error{Code: "not_found", Field: "index.file", Message: "index.file: no index file there"}
		}
		if err != nil {
			return nil, err
		}
		body = f
	case src.URL != "":
		body = unpack.NewDownload(ctx, src.URL, idle, retries)
	default:
		return nil, &filecas.Error{Code: "bad_request", Field: "index", Message: "index: neither a file nor a url"}
	}
	defer body.Close()
	h := sha256.New()
	limits := filecas.DefaultLimits
	counted := &countingReader{r: io.LimitReader(body, limits.MaxCompressed+1)}
	read := io.TeeReader(counted, h)
	x, err := filecas.Decode(read, limits)
	if err != nil {
		return nil, err
	}
	// What follows the JSON (a zstd frame's end, padding) is hashed too, within the bound.
	if _, err := io.Copy(io.Discard, read); err != nil {
		return nil, err
	}
	if counted.n > limits.MaxCompressed {
		return nil, &filecas.Error{Code: "bad_request", Field: "index", Message: fmt.Sprintf("index: the object is larger than %d bytes", limits.MaxCompressed)}
	}
	if src.Sha256 != "" {
		if got := hex.EncodeToString(h.Sum(nil)); got != src.Sha256 {
			return nil, &filecas.Error{Code: "verify_failed", Field: "index", Message: fmt.Sprintf("index: the stored index has sha256 %s, its snapshot's record says %s", got, src.Sha256)}
		}
	}
	return x, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

package main

import (
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
	var req filesUnpackRequest
	root, resultOut, answerError, err := rootedCommand("files-unpack", "the empty staging directory the tree is made in", args, &req)
	if err != nil {
		return err
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
		Root: root, Packs: req.Packs, KeepOwners: req.KeepOwners, Walk: req.Walk,
		Idle: idle, Retries: req.Retries, Concurrency: req.Concurrency, Limit: req.Limit,
	})
	if err != nil {
		return answerError(err)
	}
	out := filesUnpackResult{UnpackResult: res, IndexMs: indexMs, ManifestAgreed: req.Manifest != nil}
	if req.StatsOut != "" && req.Index.Sha256 != "" && res.Equal {
		n, err := filecas.WriteStats(root, x, req.Index.Sha256, req.StatsOut)
		if err != nil {
			return answerError(fmt.Errorf("statsOut: %w", err))
		}
		out.Stats = &n
	}
	return json.NewEncoder(resultOut).Encode(out)
}

// indexSource is where an index is: a sandbox file or a presigned URL, and the SHA-256 its record keeps; and, when
// it is a layer (internal/filecas layer.go), the objects beneath it, its whole index first.
type indexSource struct {
	File   string                `json:"file"`
	URL    string                `json:"url"`
	Sha256 string                `json:"sha256"`
	Chain  []filecas.ChainObject `json:"chain"`
}

// readIndex reads the index's objects whole (so each SHA-256 is of every byte; the chain's at once), compares the
// snapshot's own with the SHA-256 the source gives, and composes, decodes and validates them within
// filecas.DefaultLimits (each layer names the SHA-256 of the object beneath it).
func readIndex(ctx context.Context, src indexSource, retries int, idle time.Duration) (*filecas.Index, error) {
	bodies, err := readIndexObjects(ctx, src, retries, idle)
	if err != nil {
		return nil, err
	}
	x, _, err := filecas.DecodeChain(bodies, filecas.DefaultLimits)
	return x, err
}

// readIndexObjects is readIndex's reading: the chain's objects, whole index first and the snapshot's own last, each
// whole, the snapshot's checked against the source's SHA-256 (the others are checked as the chain is composed).
func readIndexObjects(ctx context.Context, src indexSource, retries int, idle time.Duration) ([][]byte, error) {
	if src.File == "" && src.URL == "" {
		return nil, &filecas.Error{Code: "bad_request", Field: "index", Message: "index: neither a file nor a url"}
	}
	if len(src.Chain) > filecas.MaxDepth {
		return nil, &filecas.Error{Code: "bad_request", Field: "index.chain", Message: fmt.Sprintf("index.chain: %d objects; a chain has at most %d beneath its snapshot's", len(src.Chain), filecas.MaxDepth)}
	}
	objects := append(append([]filecas.ChainObject{}, src.Chain...), filecas.ChainObject{File: src.File, URL: src.URL, Sha256: src.Sha256})
	bodies, _, err := filecas.ReadChain(len(objects), func(i int) ([]byte, error) {
		field := "index"
		if i < len(src.Chain) {
			field = fmt.Sprintf("index.chain.%d", i)
		}
		return readIndexObject(ctx, objects[i], field, retries, idle)
	})
	if err != nil {
		return nil, err
	}
	if src.Sha256 != "" {
		if got := sha256Hex(bodies[len(bodies)-1]); got != src.Sha256 {
			return nil, &filecas.Error{Code: "verify_failed", Field: "index", Message: fmt.Sprintf("index: the stored index has sha256 %s, its snapshot's record says %s", got, src.Sha256)}
		}
	}
	return bodies, nil
}

// readIndexObject reads one object whole within filecas.DefaultLimits.MaxCompressed: the file when it names one (a
// chain object's kept copy is taken only if it hashes to its SHA-256), else the URL's.
func readIndexObject(ctx context.Context, o filecas.ChainObject, field string, retries int, idle time.Duration) ([]byte, error) {
	limit := filecas.DefaultLimits.MaxCompressed
	if o.File != "" {
		b, err := readFileCapped(o.File, limit)
		switch {
		case err == nil && (field == "index" || sha256Hex(b) == o.Sha256):
			return b, nil
		case o.URL == "" && errors.Is(err, os.ErrNotExist):
			return nil, &filecas.Error{Code: "not_found", Field: field + ".file", Message: field + ".file: no index file there"}
		case o.URL == "" && err != nil:
			return nil, err
		case o.URL == "":
			return b, nil // its SHA-256 is checked against the layer's parent
		}
	}
	if o.URL == "" {
		return nil, &filecas.Error{Code: "bad_request", Field: field, Message: field + ": neither a file nor a url"}
	}
	body := unpack.NewDownload(ctx, o.URL, idle, retries)
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = &filecas.Error{Code: "bad_request", Field: field, Message: fmt.Sprintf("%s: the object is larger than %d bytes", field, limit)}
	}
	return b, err
}

func readFileCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = &filecas.Error{Code: "bad_request", Field: "index", Message: fmt.Sprintf("index: the object is larger than %d bytes", limit)}
	}
	return b, err
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

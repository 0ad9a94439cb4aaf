package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	rdebug "runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"snapflow/native/lazy/internal/fetch"
	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/filesfs"
	"snapflow/native/lazy/internal/lazyimage"
	"snapflow/native/lazy/internal/pack"
	"snapflow/native/lazy/internal/urlfile"
)

// filesMountCmd serves a file-level index's tree read-only at MOUNTPOINT until SIGTERM/SIGINT (then unmounts) or an
// unmount from outside, and exits 0. stdout gets one line, {"ready":true,...}, once the tree answers; the status
// file is kept up to date throughout (internal/filesfs).
func filesMountCmd(args []string) error {
	start := time.Now()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fs := newFlags("files-mount")
	indexPath := fs.String("index", "", "the file-level index (zstd-compressed MessagePack, or version 1's JSON: internal/filecas)")
	indexSha := fs.String("index-sha256", "", "the index file's SHA-256, checked as it is read (the record's): a different file is refused")
	indexURLs := fs.String("index-url", "", `JSON file {"index":"<presigned GET url>"}: the index is fetched from the store (its SHA-256 checked: -index-sha256 is then required) and kept at -index`)
	chainShas := fs.String("chain-sha256", "", `when the index is a layer (internal/filecas layer.go): the SHA-256s of the objects beneath it, whole index first, comma-separated; their URLs are "chain.0", "chain.1", … in -index-url's file`)
	urls := fs.String("urls", "", `JSON file {"<pack name>":"<presigned GET url>"}, re-read after a 403`)
	cacheDir := fs.String("cache", "", "cache directory: CACHE/packs/<pack> holds the verified frames (may be shared by mounts of one lineage)")
	mountpoint := fs.String("mountpoint", "", "directory the tree is mounted on")
	statusPath := fs.String("status", "", "status file (default CACHE/status.json)")
	prefetch := fs.Int("prefetch", 16, "parallel background Range GETs; 0 fetches on demand only")
	group := fs.Int("group", 4<<20, "bytes of neighbouring frames one prefetch GET takes at most")
	// 1.5 s, not the image mount's 300 ms: completing a files mount costs ~2 CPU-s (every chunk decompressed and
	// hashed), and a sweep that starts while a first use parses what it read takes the CPU from it (bench/files_mount.py).
	quiet := fs.Duration("quiet", 1500*time.Millisecond, "the prefetch sweep waits until reads have fetched nothing for this long; 0 sweeps at once")
	quietAtMost := fs.Duration("quiet-at-most", 3*time.Second, "the sweep stands back for reads no longer than this after the start; 0: no bound")
	passes := fs.Int("passes", 3, "prefetch sweeps; later ones fetch each missing chunk alone")
	retryPause := fs.Duration("retry-pause", 2*time.Second, "pause before a prefetch sweep that retries failures")
	invalidHold := fs.Duration("invalid-hold", filesfs.DefaultInvalidHold, "a chunk that failed its SHA-256 fails the reads needing it at once for this long")
	fetchTimeout := fs.Duration("fetch-timeout", 30*time.Second, "deadline per GET attempt (a stalled store is abandoned)")
	retries := fs.Int("retries", 4, "retries per fetch")
	backoff := fs.Duration("backoff", 200*time.Millisecond, "first pause between retries; doubles")
	allowOther := fs.Bool("allow-other", false, "let other users read the mount")
	debug := fs.Bool("debug", false, "log FUSE traffic to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "index", "urls", "cache", "mountpoint"); err != nil {
		return err
	}
	if *statusPath == "" {
		*statusPath = filepath.Join(*cacheDir, "status.json")
	}
	// No collection while the index is decoded and laid out (~30% of the time to ready for 31.7k entries): it is all
	// live data. The memory limit still collects if a large index would take too much.
	rdebug.SetMemoryLimit(1 << 30)
	gc := rdebug.SetGCPercent(-1)
	var err error
	// The index comes from a sandbox: decoded within bounds and validated (no name leads outside the tree) before
	// anything is mounted.
	var x *filecas.Index
	var tree *filesfs.Tree
	var chain []string
	if *chainShas != "" {
		chain = strings.Split(*chainShas, ",")
	}
	if *indexURLs != "" {
		// The tree is laid out while the index is validated (filesfs.Build reads only names, types and links, ends on
		// any input, and nothing is mounted unless both succeed).
		x, err = fetchFilesIndex(*indexURLs, *indexPath, *indexSha, chain, *fetchTimeout, *retries, func(x *filecas.Index) (err error) {
			tree, err = filesfs.Build(x)
			return err
		})
	} else if len(chain) > 0 {
		err = &pack.Error{Code: "bad_request", Field: "index.chain", Message: "a layer's chain is fetched: -chain-sha256 needs -index-url"}
	} else if x, err = loadFilesIndex(*indexPath, *indexSha); err == nil {
		tree, err = filesfs.Build(x)
	}
	if err != nil {
		return refusedLine(err)
	}
	indexMs := time.Since(start).Milliseconds() // decoded, validated and laid out: the part that grows with the tree
	u, err := urlfile.Open(*urls)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*mountpoint, 0o755); err != nil {
		return err
	}
	retriesN := *retries
	if retriesN == 0 {
		retriesN = -1 // the fetcher reads 0 as "default"
	}
	f := &fetch.Fetcher{URLs: u, Client: &http.Client{Transport: transport(*prefetch)}, Timeout: *fetchTimeout, Retries: retriesN, Backoff: *backoff}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ct, err := filesfs.NewContent(ctx, x, *cacheDir, f, start)
	if err != nil {
		return err
	}
	ct.InvalidHold = *invalidHold

	var state atomic.Value
	state.Store("mounting")
	statusDone := make(chan struct{})
	go func() {
		ct.KeepStatus(ctx, *statusPath, 200*time.Millisecond, func() string { return state.Load().(string) })
		close(statusDone)
	}()
	go ct.Prefetch(ctx, filesfs.PrefetchOptions{Workers: *prefetch, GroupBytes: int64(*group), GapBytes: 64 << 10, Quiet: *quiet, QuietAtMost: *quietAtMost, Passes: *passes, RetryPause: *retryPause})

	server, err := filesfs.Mount(*mountpoint, tree, ct, filesfs.Options{AllowOther: *allowOther, Debug: *debug})
	if err != nil {
		return fmt.Errorf("mount %s: %w", *mountpoint, err)
	}
	// "Answers" means a stat through the kernel reaches us.
	if st, err := os.Stat(*mountpoint); err != nil || !st.IsDir() {
		unmount(server, *mountpoint)
		return fmt.Errorf("mount does not answer: %v", err)
	}
	ct.MarkReady()
	state.Store("ready")
	snap := ct.Snapshot("ready")
	if err := lazyimage.WriteStatus(*statusPath, snap); err != nil {
		unmount(server, *mountpoint)
		return err
	}
	if err := printJSON(map[string]any{
		"ready": true, "mountpoint": *mountpoint, "status": *statusPath, "readyMs": snap.ReadyMs, "indexMs": indexMs, "entries": len(x.Entries),
		"nodes": len(tree.Nodes), "skipped": tree.Skipped, "chunks": snap.Chunks.Total, "local": snap.Chunks.Local, "bytes": snap.Bytes.Total,
	}); err != nil {
		unmount(server, *mountpoint)
		return err
	}
	// Collection again, now that the tree answers: restored before, its first cycle (the whole index's heap, marked
	// from a 4 MB trigger) ran beside the mount on the way to ready.
	rdebug.SetGCPercent(gc)
	rdebug.SetMemoryLimit(math.MaxInt64)
	err = serveUntilStopped(serving{ctx: ctx, server: server, mountpoint: *mountpoint, sig: sig, stop: stop, statusDone: statusDone,
		complete: ct.Complete(), completeMs: func() int64 { return ct.Snapshot("ready").CompleteMs }, what: "files"})
	state.Store("stopped")
	_ = lazyimage.WriteStatus(*statusPath, ct.Snapshot("stopped"))
	return err
}

// refusedLine prints a refused index's error as the one stdout line, {"error":{code,message,field}}, so the agent
// answers with its code (path_outside_root, bad_request) rather than a tool failure.
func refusedLine(err error) error {
	var perr *pack.Error
	if errors.As(err, &perr) {
		_ = printJSON(map[string]any{"error": perr})
	}
	return err
}

// fetchFilesIndex GETs the index from the URL the file names (and, for a layer, the chain's objects beneath it, at
// once), checks each SHA-256, and composes and decodes them while a copy of the snapshot's own object is written at
// path (renamed into place once whole: a compaction's backup and a remount read it there). One process and no round
// trip through the agent between the store and the decoder.
func fetchFilesIndex(urlsPath, path, want string, chain []string, timeout time.Duration, retries int, beside func(*filecas.Index) error) (*filecas.Index, error) {
	if want == "" {
		return nil, &pack.Error{Code: "bad_request", Field: "index.sha256", Message: "a fetched index needs the SHA-256 its record keeps"}
	}
	if len(chain) > filecas.MaxDepth {
		return nil, &pack.Error{Code: "bad_request", Field: "index.chain", Message: fmt.Sprintf("%d chain objects; at most %d", len(chain), filecas.MaxDepth)}
	}
	u, err := urlfile.Open(urlsPath)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(chain)+1)
	shas := append(append([]string{}, chain...), want)
	for i := range chain {
		names[i] = fmt.Sprintf("chain.%d", i)
	}
	names[len(chain)] = "index"
	srcs := make([]string, len(names))
	for i, name := range names {
		src, ok := u.URL(name)
		if !ok {
			return nil, &pack.Error{Code: "bad_request", Field: "index.url", Message: "the index URL file names no " + name}
		}
		srcs[i] = src
	}
	bodies, _, err := filecas.ReadChain(len(names), func(i int) ([]byte, error) {
		body, err := filecas.GetIndex(srcs[i], timeout, retries)
		if err != nil {
			return nil, &pack.Error{Code: "transfer_failed", Field: "index.url", Message: names[i] + ": " + err.Error()}
		}
		return body, nil
	})
	if err != nil {
		return nil, err
	}
	// The objects are hashed on the other core while they are decoded (the decoder is bounded and refuses what does
	// not hold together, whatever bytes it is given): nothing decoded is used before every SHA-256 matched, and the
	// snapshot's own object is kept only then.
	checked := make(chan error, 1)
	go func() {
		for i, body := range bodies {
			if got := sha256Hex(body); got != shas[i] {
				checked <- &pack.Error{Code: "verify_failed", Field: "index.sha256", Message: fmt.Sprintf("the stored %s's SHA-256 is %s, not %s", names[i], got, shas[i])}
				return
			}
		}
		if err := keepFile(path, bodies[len(bodies)-1]); err != nil {
			checked <- fmt.Errorf("keeping the index at %s: %w", path, err)
			return
		}
		checked <- nil
	}()
	x, _, err := filecas.DecodeChainOf(bodies, shas, filecas.DefaultLimits, beside)
	if cerr := <-checked; cerr != nil {
		return nil, cerr
	}
	return x, err
}

// keepFile writes b at path whole or not at all (a temporary name, then a rename).
func keepFile(path string, b []byte) error {
	tmp := pack.TempManifest(path)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// loadFilesIndex decodes and validates the index, hashing the file as it is read when its SHA-256 is given.
func loadFilesIndex(path, want string) (*filecas.Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	r := io.TeeReader(f, h)
	x, err := filecas.Decode(r, filecas.DefaultLimits)
	if err != nil || want == "" {
		return x, err
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // whatever the decoder left unread is part of the file too
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, &pack.Error{Code: "verify_failed", Field: "index.sha256", Message: fmt.Sprintf("the index file's SHA-256 is %s, not %s", got, want)}
	}
	return x, nil
}

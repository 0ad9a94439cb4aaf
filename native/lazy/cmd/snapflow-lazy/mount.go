package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"snapflow/native/lazy/internal/cache"
	"snapflow/native/lazy/internal/fetch"
	"snapflow/native/lazy/internal/fusefs"
	"snapflow/native/lazy/internal/index"
	"snapflow/native/lazy/internal/lazyimage"
	"snapflow/native/lazy/internal/urlfile"
)

// mountCmd serves MOUNTPOINT/image lazily until SIGTERM/SIGINT (then unmounts) or an unmount from outside, and exits 0.
// stdout gets one line, {"ready":true,...}, once the mount answers; status.json is kept up to date throughout.
func mountCmd(args []string) error {
	start := time.Now()
	// Before anything else: a SIGTERM that arrives while mounting must still end in a clean unmount, not a kill.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fs := newFlags("mount")
	indexPath := fs.String("index", "", "index file")
	urls := fs.String("urls", "", `JSON file {"<sha256>":"<presigned GET url>"}, re-read after a 403`)
	cacheDir := fs.String("cache", "", "chunk cache directory (content-addressed; may be shared by images)")
	mountpoint := fs.String("mountpoint", "", "directory to mount on; the image appears as MOUNTPOINT/image")
	statusPath := fs.String("status", "", "status file (default CACHE/status.json)")
	prefetch := fs.Int("prefetch", 32, "parallel background fetches (a far store needs many in flight); 0 fetches on demand only")
	invalidHold := fs.Duration("invalid-hold", lazyimage.DefaultInvalidHold, "a chunk that failed its SHA-256 fails the reads needing it at once for this long, instead of a fetch per read")
	passes := fs.Int("passes", 3, "prefetch sweeps; later ones retry failed chunks")
	retryPause := fs.Duration("retry-pause", 2*time.Second, "pause before a prefetch sweep that retries failures")
	quiet := fs.Duration("quiet", 300*time.Millisecond, "the prefetch sweep waits until reads have fetched nothing for this long (and this long after the start); 0 sweeps at once")
	quietAtMost := fs.Duration("quiet-at-most", 3*time.Second, "the sweep stands back for reads no longer than this after the start; 0: no bound")
	fetchTimeout := fs.Duration("fetch-timeout", 30*time.Second, "deadline per chunk GET attempt (a stalled store is abandoned)")
	retries := fs.Int("retries", 4, "retries per chunk fetch")
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
	idx, err := index.Load(*indexPath)
	if err != nil {
		return err
	}
	u, err := urlfile.Open(*urls)
	if err != nil {
		return err
	}
	c, err := cache.Open(*cacheDir)
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
	img := lazyimage.New(ctx, idx, c, f, start)
	img.InvalidHold = *invalidHold

	var state atomic.Value
	state.Store("mounting")
	statusDone := make(chan struct{})
	go func() {
		img.KeepStatus(ctx, *statusPath, 200*time.Millisecond, func() string { return state.Load().(string) })
		close(statusDone)
	}()

	// The prefetcher starts with the FUSE mount rather than after it: the image's first chunk and its tables are on
	// their way (or here) by the time the kernel's mount asks for them.
	go img.Prefetch(ctx, lazyimage.PrefetchOptions{Workers: *prefetch, Passes: *passes, RetryPause: *retryPause, Quiet: *quiet, QuietAtMost: *quietAtMost})

	server, err := fusefs.Mount(*mountpoint, img, fusefs.Options{AllowOther: *allowOther, Debug: *debug})
	if err != nil {
		return fmt.Errorf("mount %s: %w", *mountpoint, err)
	}
	imagePath := filepath.Join(*mountpoint, fusefs.FileName)
	// "Answers" means a stat through the kernel reaches us: from here on the agent can mount squashfs over the file.
	if st, err := os.Stat(imagePath); err != nil || st.Size() != idx.Size {
		unmount(server, *mountpoint)
		return fmt.Errorf("mount does not answer: %v", err)
	}
	img.MarkReady()
	state.Store("ready")
	snap := img.Snapshot("ready")
	// Written before the ready line, so whoever reads that line can also read the status file.
	if err := lazyimage.WriteStatus(*statusPath, snap); err != nil {
		unmount(server, *mountpoint)
		return err
	}
	if err := printJSON(map[string]any{
		"ready": true, "mountpoint": *mountpoint, "image": imagePath, "status": *statusPath, "readyMs": snap.ReadyMs,
		"size": idx.Size, "chunks": snap.Chunks.Total, "local": snap.Chunks.Local,
	}); err != nil {
		unmount(server, *mountpoint)
		return err
	}

	err = serveUntilStopped(serving{ctx: ctx, server: server, mountpoint: *mountpoint, sig: sig, stop: stop, statusDone: statusDone,
		complete: img.Complete(), completeMs: func() int64 { return img.Snapshot("ready").CompleteMs }, what: "image"})
	state.Store("stopped")
	_ = lazyimage.WriteStatus(*statusPath, img.Snapshot("stopped"))
	return err
}

// serving is a mount being served: what serveUntilStopped waits on and stops.
type serving struct {
	ctx        context.Context
	server     *fuse.Server
	mountpoint string
	sig        <-chan os.Signal
	// stop cancels ctx: fetches are abandoned, reads waiting on them fail with EIO rather than hang the unmount
	stop func()
	// statusDone is closed once the status keeper has written its last status (after stop)
	statusDone <-chan struct{}
	complete   <-chan struct{}
	completeMs func() int64
	what       string
}

// serveUntilStopped serves a ready mount until SIGTERM/SIGINT or an unmount from outside (fusermount3 -u, umount -l,
// the agent tearing a sandbox down: nothing is left to serve, so the process ends as after SIGTERM instead of
// lingering without a mount), noting on stderr when everything became local; then stops and unmounts. Both lazy
// mounts (an image's, a file-level tree's) end this way.
func serveUntilStopped(s serving) error {
	go func() {
		select {
		case <-s.complete:
			fmt.Fprintf(os.Stderr, "snapflow-lazy: %s complete after %d ms\n", s.what, s.completeMs())
		case <-s.ctx.Done():
		}
	}()
	unmounted := make(chan struct{})
	go func() {
		s.server.Wait()
		close(unmounted)
	}()
	select {
	case <-s.sig:
	case <-unmounted:
	}
	s.stop()
	<-s.statusDone
	select {
	case <-unmounted:
		return nil
	default:
		return unmount(s.server, s.mountpoint)
	}
}

// transport allows as many idle connections per host as there are fetchers, so chunk GETs reuse connections.
func transport(prefetch int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(prefetch, 1) + 8
	return t
}

// unmount detaches the filesystem. A mount still in use (say, a squashfs loop-mounted on top) refuses a clean unmount;
// after a few tries it is detached lazily, so nothing is left in the mount table either way.
func unmount(server *fuse.Server, mountpoint string) error {
	var err error
	for i := 0; i < 5; i++ {
		if err = server.Unmount(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if derr := syscall.Unmount(mountpoint, syscall.MNT_DETACH); derr != nil {
		return fmt.Errorf("unmount %s: %v; lazy unmount: %v", mountpoint, err, derr)
	}
	fmt.Fprintf(os.Stderr, "snapflow-lazy: %s was busy (%v); detached lazily\n", mountpoint, err)
	return nil
}

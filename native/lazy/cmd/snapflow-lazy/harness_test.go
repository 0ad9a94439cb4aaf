package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/index"
	"snapflow/native/lazy/internal/lazyimage"
	"snapflow/native/lazy/internal/testkit"
)

// The end-to-end tests run the real binary: a real squashfs image, a real HTTP store, a real FUSE mount.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "snapflow-lazy-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "snapflow-lazy")
	build := []string{"build", "-o", binary}
	if os.Getenv("SNAPFLOW_LAZY_RACE") != "" { // run the mounted binary under the race detector
		build = append(build, "-race")
	}
	if out, err := exec.Command("go", append(build, ".")...).CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// fixture: one generated tree, its squashfs image and index, shared by the tests (building it takes seconds).
type fixture struct {
	tree, image, indexPath string
	idx                    *index.Index
	chunks                 map[string][]byte
}

var (
	fixtureOnce sync.Once
	fixtureDir  string
	shared      fixture
)

func getFixture(t *testing.T) fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "snapflow-lazy-fixture-")
		if err != nil {
			t.Fatal(err)
		}
		fixtureDir = dir
		f := fixture{tree: filepath.Join(dir, "tree"), image: filepath.Join(dir, "image.sqfs"), indexPath: filepath.Join(dir, "index.json")}
		testkit.Tree(t, f.tree, 7, 24<<20)
		testkit.Squashfs(t, f.tree, f.image)
		out, err := exec.Command(binary, "chunk", "--image", f.image, "--avg", "64KiB").Output()
		if err != nil {
			t.Fatalf("chunk: %v", err)
		}
		if err := os.WriteFile(f.indexPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if f.idx, err = index.Load(f.indexPath); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(f.image)
		if err != nil {
			t.Fatal(err)
		}
		f.chunks = map[string][]byte{}
		for _, c := range f.idx.Chunks {
			f.chunks[c.SHA256] = data[c.Offset : c.Offset+c.Size]
		}
		shared = f
	})
	if shared.idx == nil {
		t.Fatal("fixture failed in an earlier test")
	}
	return shared
}

func (f fixture) digests() []string {
	var d []string
	for _, c := range f.idx.Distinct() {
		d = append(d, c.SHA256)
	}
	return d
}

// mount is one running `snapflow-lazy mount`.
type mount struct {
	cmd                   *exec.Cmd
	dir, mnt, cache, urls string
	ready                 map[string]any
	stopped               bool
}

func startMount(t *testing.T, f fixture, store *testkit.Store, extra ...string) *mount {
	t.Helper()
	return startMountOn(t, f, store, "", extra...)
}

// startMountOn starts a mount whose chunk cache is cacheDir (a new one when empty).
func startMountOn(t *testing.T, f fixture, store *testkit.Store, cacheDir string, extra ...string) *mount {
	t.Helper()
	testkit.NeedRootFUSE(t)
	dir := t.TempDir()
	if cacheDir == "" {
		cacheDir = filepath.Join(dir, "cache")
	}
	m := &mount{dir: dir, mnt: filepath.Join(dir, "mnt"), cache: cacheDir, urls: filepath.Join(dir, "urls.json")}
	if err := store.WriteURLs(m.urls, f.digests(), ""); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"mount", "--index", f.indexPath, "--urls", m.urls, "--cache", m.cache, "--mountpoint", m.mnt,
		"--fetch-timeout", "500ms", "--backoff", "20ms", "--retry-pause", "100ms"}, extra...)
	m.cmd = exec.Command(binary, args...)
	m.cmd.Stderr = os.Stderr
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.stop(t) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	if err := json.Unmarshal([]byte(line), &m.ready); err != nil || m.ready["ready"] != true {
		t.Fatalf("ready line %q: %v", line, err)
	}
	return m
}

func (m *mount) image() string { return filepath.Join(m.mnt, "image") }

// stop sends SIGTERM and checks the process exits 0 and leaves nothing mounted.
func (m *mount) stop(t *testing.T) {
	t.Helper()
	if m.stopped {
		return
	}
	m.stopped = true
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("mount exited with %v after SIGTERM", err)
		}
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		t.Errorf("mount did not exit within 10 s of SIGTERM")
	}
	if mounted(m.mnt) {
		_ = syscall.Unmount(m.mnt, syscall.MNT_DETACH)
		t.Errorf("%s still mounted after SIGTERM", m.mnt)
	}
}

func (m *mount) status(t *testing.T) lazyimage.Status {
	t.Helper()
	var s lazyimage.Status
	b, err := os.ReadFile(filepath.Join(m.cache, "status.json"))
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return s
}

// waitStatus polls status.json until ok or the deadline.
func (m *mount) waitStatus(t *testing.T, d time.Duration, ok func(lazyimage.Status) bool) lazyimage.Status {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s := m.status(t)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never reached the condition: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mounted reports whether dir appears as a mount point in /proc/self/mountinfo.
func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

// preadNoReadahead reads n bytes at off with the kernel's readahead off for this descriptor, so the FUSE process sees
// only the pages asked for; fresh=true first drops cached pages so the read really reaches the mount.
func preadNoReadahead(path string, off int64, n int, fresh bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		return nil, err
	}
	if fresh {
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}
	p := make([]byte, n)
	k, err := f.ReadAt(p, off)
	return p[:k], err
}

// mountSquashfs mounts image at a new directory with the kernel (loop) or squashfuse, and unmounts it at cleanup.
func mountSquashfs(t *testing.T, image string, kernel bool) string {
	t.Helper()
	target, err := os.MkdirTemp("", "snapflow-lazy-sq-")
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if kernel {
		cmd = exec.Command("mount", "-t", "squashfs", "-o", "loop,ro,nosuid,nodev", image, target)
	} else {
		if _, err := exec.LookPath("squashfuse"); err != nil {
			t.Skip("squashfuse not installed")
		}
		cmd = exec.Command("squashfuse", image, target)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	t.Cleanup(func() { unmountSquashfs(t, target) })
	return target
}

func unmountSquashfs(t *testing.T, target string) {
	if mounted(target) {
		if out, err := exec.Command("umount", target).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", target, err, out)
			_ = syscall.Unmount(target, syscall.MNT_DETACH)
		}
	}
	os.Remove(target)
}

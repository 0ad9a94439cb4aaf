package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"snapflow/native/lazy/internal/filesfs"
	"snapflow/native/lazy/internal/testkit"
)

// filesSetup: a generated tree, its index written to a file, its pack served over HTTP and a URL file for it.
func filesSetup(t *testing.T) (src, indexPath, urls string, store *testkit.PackStore) {
	t.Helper()
	dir := t.TempDir()
	src = filepath.Join(dir, "src")
	testkit.FilesTree(t, src, 2)
	x, pack := testkit.FilesPack(t, src, "snap-a", 16<<10)
	indexPath, urls = filepath.Join(dir, "index.zst"), filepath.Join(dir, "urls.json")
	testkit.WriteIndex(t, indexPath, x)
	store = testkit.NewPackStore(map[string][]byte{"snap-a": pack})
	t.Cleanup(store.Close)
	if err := store.WriteURLs(urls); err != nil {
		t.Fatal(err)
	}
	return src, indexPath, urls, store
}

func TestFilesMountServesTheTreeCompletesAndStopsOnSIGTERM(t *testing.T) {
	testkit.NeedRootFUSE(t)
	src, indexPath, urls, _ := filesSetup(t)
	dir := t.TempDir()
	mnt, cacheDir := filepath.Join(dir, "mnt"), filepath.Join(dir, "cache")
	cmd := exec.Command(binary, "files-mount", "--index", indexPath, "--urls", urls, "--cache", cacheDir, "--mountpoint", mnt,
		"--prefetch", "2", "--quiet", "0", "--fetch-timeout", "2s", "--backoff", "20ms")
	cmd.Stderr = os.Stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if mounted(mnt) {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		_ = cmd.Process.Kill()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var ready map[string]any
	if err != nil || json.Unmarshal([]byte(line), &ready) != nil || ready["ready"] != true || ready["entries"].(float64) < 15 {
		t.Fatalf("ready line %q: %v", line, err)
	}
	for _, name := range []string{"a/b/c/big.bin", "pkg/lib/one.js", "a/sparse.img", "pkg/hard.js"} {
		want, _ := os.ReadFile(filepath.Join(src, name))
		if got, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s through the mount: %v", name, err)
		}
	}
	if target, err := os.Readlink(filepath.Join(mnt, "pkg/link.js")); err != nil || target != "../a/b/mid.js" {
		t.Fatalf("symlink: %q %v", target, err)
	}
	var st filesfs.Status
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(cacheDir, "status.json"))
		if json.Unmarshal(b, &st) == nil && st.CompleteMs >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never complete: %+v", st)
		}
	}
	if st.Chunks.Local != st.Chunks.Total || st.Chunks.Failed != 0 || st.ReadyMs < 0 {
		t.Fatalf("status %+v", st)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if mounted(mnt) {
		t.Fatal("still mounted after SIGTERM")
	}
}

func TestFilesMountRefusesAnIndexWithANameOutsideTheTreeBeforeMounting(t *testing.T) {
	src, _, urls, _ := filesSetup(t)
	x, _ := testkit.FilesPack(t, src, "snap-a", 16<<10)
	x.Entries[2].Path = "a/../../etc/escape"
	indexPath := filepath.Join(t.TempDir(), "bad.zst")
	testkit.WriteIndex(t, indexPath, x)
	mnt := filepath.Join(t.TempDir(), "mnt")
	out, err := exec.Command(binary, "files-mount", "--index", indexPath, "--urls", urls, "--cache", t.TempDir(), "--mountpoint", mnt).Output()
	if err == nil || !strings.Contains(string(out), `"code":"path_outside_root"`) {
		t.Fatalf("exit %v, stdout %q: want a failure naming path_outside_root", err, out)
	}
	if mounted(mnt) {
		t.Fatal("mounted an index it refused")
	}
	// A good index that is not the file the record names is refused too.
	_, good, _, _ := filesSetup(t)
	out, err = exec.Command(binary, "files-mount", "--index", good, "--index-sha256", strings.Repeat("0", 64), "--urls", urls, "--cache", t.TempDir(), "--mountpoint", mnt).Output()
	if err == nil || !strings.Contains(string(out), `"code":"verify_failed"`) || mounted(mnt) {
		t.Fatalf("exit %v, stdout %q: want verify_failed and no mount", err, out)
	}
	if _, err := os.Stat(mnt); !os.IsNotExist(err) {
		t.Fatalf("the mountpoint was made before the index was checked: %v", err)
	}
}

// A fetched index is hashed while it is decoded: one whose SHA-256 is not the record's is refused (verify_failed)
// however well it decodes, nothing is mounted, and it is not kept at --index.
func TestFilesMountRefusesAFetchedIndexThatIsNotTheRecordsAndKeepsNothing(t *testing.T) {
	_, good, urls, _ := filesSetup(t)
	body, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	dir := t.TempDir()
	indexURLs := filepath.Join(dir, "index-url.json")
	if err := os.WriteFile(indexURLs, []byte(`{"index":"`+srv.URL+`/index"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	kept, mnt := filepath.Join(dir, "kept", "index.zst"), filepath.Join(dir, "mnt")
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		t.Fatal(err)
	}
	// Bounded: a helper that mounted what it should have refused would serve until stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer func() {
		if mounted(mnt) {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	}()
	out, err := exec.CommandContext(ctx, binary, "files-mount", "--index", kept, "--index-url", indexURLs, "--index-sha256", strings.Repeat("0", 64),
		"--urls", urls, "--cache", t.TempDir(), "--mountpoint", mnt, "--retries", "0").Output()
	if err == nil || !strings.Contains(string(out), `"code":"verify_failed"`) || mounted(mnt) {
		t.Fatalf("exit %v, stdout %q: want verify_failed and no mount", err, out)
	}
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Fatalf("an index that is not the record's was kept: %v", err)
	}
}

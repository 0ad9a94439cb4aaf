package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// get writes beside --out and renames onto it: a link planted at --out is replaced, never written through, and a
// refused GET leaves --out as it was.
func TestGetReplacesALinkAtItsOutputRatherThanWritingThroughIt(t *testing.T) {
	body := bytes.Repeat([]byte("image bytes "), 100_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refused" {
			http.Error(w, "AccessDenied", http.StatusForbidden)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	dir := t.TempDir()
	victim, out := filepath.Join(dir, "victim"), filepath.Join(dir, "images", "a.img")
	if err := os.WriteFile(victim, []byte("not the sandbox's to write"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, out); err != nil {
		t.Fatal(err)
	}
	get := func(url string) (string, error) {
		cmd := exec.Command(binary, "get", "--out", out, "--result-fd", "1")
		cmd.Stdin = strings.NewReader(`{"url":"` + url + `","idleSeconds":5,"retries":0}` + "\n")
		got, err := cmd.Output()
		return string(got), err
	}
	if got, err := get(srv.URL + "/refused"); err == nil || !strings.Contains(got, "403") {
		t.Fatalf("a refused GET: exit %v, answer %q", err, got)
	}
	if target, err := os.Readlink(out); err != nil || target != victim {
		t.Fatalf("a refused GET changed --out: %q %v", target, err)
	}
	if got, err := get(srv.URL + "/image"); err != nil || !strings.Contains(got, `"bytes":1200000`) {
		t.Fatalf("exit %v, answer %q", err, got)
	}
	if st, err := os.Lstat(out); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("--out is not the downloaded file: %v %v", st, err)
	}
	if v, _ := os.ReadFile(victim); string(v) != "not the sandbox's to write" {
		t.Fatalf("written through the link: %q", v)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, body) {
		t.Fatal("--out holds other bytes than the object's")
	}
	if names, _ := os.ReadDir(filepath.Dir(out)); len(names) != 1 {
		t.Fatalf("left beside --out: %v", names)
	}
}

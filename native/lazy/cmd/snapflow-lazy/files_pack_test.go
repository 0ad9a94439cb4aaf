package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// partStore answers presigned UploadPart PUTs as S3 does (an ETag per part) and a GET of the stored index.
type partStore struct {
	*httptest.Server
	mu    sync.Mutex
	parts map[int][]byte
	puts  int
	index []byte
}

func newPartStore() *partStore {
	s := &partStore{parts: map[int][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Method == http.MethodGet {
			w.Write(s.index)
			return
		}
		k, _ := strconv.Atoi(r.URL.Query().Get("partNumber"))
		b, _ := io.ReadAll(r.Body)
		s.parts[k] = b
		s.puts++
		w.Header().Set("ETag", fmt.Sprintf(`"etag-%d"`, k))
	}))
	return s
}

type filesPackAnswer struct {
	Entries int
	Index   struct {
		Bytes  int64
		Sha256 string
	}
	Pack *struct {
		Name   string
		Bytes  int64
		Sha256 string
	}
	Parts []struct {
		PartNumber, Bytes int
		ETag, Sha256      string
	}
	Read, Reused struct {
		Files int
		Bytes int64
	}
	NewChunks int
	Error     *struct{ Code, Field, Message string }
}

// runFilesPack runs `files-pack --part-size 5MiB` over root into dir/{m.json,index.zst} with 10 part URLs of s.
func runFilesPack(t *testing.T, s *partStore, root, dir string, req map[string]any) (filesPackAnswer, error) {
	t.Helper()
	urls := make([]string, 10)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/pack?partNumber=%d&X-Amz-Signature=secret", s.URL, i+1)
	}
	req["urls"] = urls
	body, _ := json.Marshal(req)
	result, _ := os.CreateTemp(t.TempDir(), "result")
	cmd := exec.Command(binary, "files-pack", "--root", root, "--manifest", filepath.Join(dir, "m.json"), "--index", filepath.Join(dir, "index.zst"), "--result-fd", "3", "--part-size", strconv.Itoa(5<<20), "--concurrency", "2")
	cmd.Stdin = bytes.NewReader(body)
	cmd.ExtraFiles = []*os.File{result}
	out, err := cmd.Output()
	if len(out) != 0 {
		t.Fatalf("files-pack wrote %d bytes to stdout", len(out))
	}
	text, _ := os.ReadFile(result.Name())
	var a filesPackAnswer
	if jerr := json.Unmarshal(text, &a); jerr != nil {
		t.Fatalf("answer %q: %v (exit: %v)", text, jerr, err)
	}
	return a, err
}

func TestFilesPackPutsItsPackInPartsAndAnIncrementalOnlyWhatChanged(t *testing.T) {
	root := t.TempDir()
	blob := make([]byte, 12<<20) // incompressible: the pack is three parts of 5 MiB, the last shorter
	rand.Read(blob)
	os.WriteFile(filepath.Join(root, "blob"), blob, 0o644)
	os.WriteFile(filepath.Join(root, "small.txt"), []byte("small"), 0o644)
	s := newPartStore()
	defer s.Close()
	first := t.TempDir()
	a, err := runFilesPack(t, s, root, first, map[string]any{"name": "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Pack == nil || len(a.Parts) != 3 || len(s.parts) != 3 || a.Read.Files != 2 {
		t.Fatalf("answer %+v, %d parts stored", a, len(s.parts))
	}
	whole := sha256.New()
	for i, p := range a.Parts {
		got := s.parts[i+1]
		sum := sha256.Sum256(got)
		if p.PartNumber != i+1 || p.Bytes != len(got) || p.Sha256 != hex.EncodeToString(sum[:]) || p.ETag != fmt.Sprintf("etag-%d", i+1) || (i < 2 && p.Bytes != 5<<20) {
			t.Fatalf("part %d: reported %+v, stored %d bytes", i+1, p, len(got))
		}
		whole.Write(got)
	}
	if hex.EncodeToString(whole.Sum(nil)) != a.Pack.Sha256 {
		t.Fatal("the stored parts are not the pack the result names")
	}

	// The base from the store (no kept copy), one small file changed: only it is read, one part PUT.
	s.index, _ = os.ReadFile(filepath.Join(first, "index.zst"))
	os.WriteFile(filepath.Join(root, "small.txt"), []byte("changed"), 0o644)
	s.parts, s.puts = map[int][]byte{}, 0
	base := map[string]any{"url": s.URL + "/index?X-Amz-Signature=secret", "sha256": a.Index.Sha256}
	second := t.TempDir()
	b, err := runFilesPack(t, s, root, second, map[string]any{"name": "s2", "base": base})
	if err != nil {
		t.Fatal(err)
	}
	if b.Read.Files != 1 || b.Read.Bytes != 7 || b.Reused.Files != 1 || b.NewChunks != 1 || len(b.Parts) != 1 || s.puts != 1 {
		t.Fatalf("answer %+v, %d PUTs", b, s.puts)
	}

	// Nothing changed since: no part PUT, no pack.
	s.index, _ = os.ReadFile(filepath.Join(second, "index.zst"))
	s.puts = 0
	c, err := runFilesPack(t, s, root, t.TempDir(), map[string]any{"name": "s3", "base": map[string]any{"url": base["url"], "sha256": b.Index.Sha256}})
	if err != nil || c.Pack != nil || len(c.Parts) != 0 || s.puts != 0 {
		t.Fatalf("answer %+v (%v), %d PUTs", c, err, s.puts)
	}
}

func TestFilesPackWithAnUnusableBasePutsNothing(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f"), []byte("content"), 0o644)
	s := newPartStore()
	defer s.Close()
	s.index = []byte("not the index")
	dir := t.TempDir()
	a, err := runFilesPack(t, s, root, dir, map[string]any{"name": "s2", "base": map[string]any{"url": s.URL + "/index", "sha256": strings.Repeat("0", 64)}})
	if err == nil || a.Error == nil || a.Error.Code != "base_unusable" || s.puts != 0 {
		t.Fatalf("answer %+v (%v), %d PUTs", a, err, s.puts)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

func TestFilesPackOutWritesThePackToAFile(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "f"), []byte("content"), 0o644)
	dir := t.TempDir()
	result, _ := os.CreateTemp(t.TempDir(), "result")
	cmd := exec.Command(binary, "files-pack", "--root", root, "--manifest", filepath.Join(dir, "m.json"), "--index", filepath.Join(dir, "index.zst"), "--out", filepath.Join(dir, "pack"), "--result-fd", "3")
	cmd.Stdin = strings.NewReader(`{"name":"s1"}`)
	cmd.ExtraFiles = []*os.File{result}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var a filesPackAnswer
	text, _ := os.ReadFile(result.Name())
	json.Unmarshal(text, &a)
	pack, _ := os.ReadFile(filepath.Join(dir, "pack"))
	sum := sha256.Sum256(pack)
	if a.Pack == nil || a.Pack.Bytes != int64(len(pack)) || a.Pack.Sha256 != hex.EncodeToString(sum[:]) || len(a.Parts) != 0 {
		t.Fatalf("answer %s, pack of %d bytes", text, len(pack))
	}
}

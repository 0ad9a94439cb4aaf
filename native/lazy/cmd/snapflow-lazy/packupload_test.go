package main

import (
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

// runPackUpload runs `pack --part-size` over root with n part URLs of a test store and returns its fd-3 answer.
func runPackUpload(t *testing.T, root string, n int) (map[string]json.RawMessage, map[int][]byte, error) {
	t.Helper()
	var mu sync.Mutex
	parts := map[int][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := strconv.Atoi(r.URL.Query().Get("partNumber"))
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		parts[k] = b
		mu.Unlock()
		w.Header().Set("ETag", fmt.Sprintf(`"etag-%d"`, k))
	}))
	defer srv.Close()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/a?partNumber=%d", srv.URL, i+1)
	}
	req, _ := json.Marshal(map[string]any{"level": 3, "urls": urls})
	result, _ := os.CreateTemp(t.TempDir(), "result")
	cmd := exec.Command(binary, "pack", "--root", root, "--manifest", filepath.Join(t.TempDir(), "m.json"), "--result-fd", "3", "--part-size", strconv.Itoa(5<<20), "--concurrency", "2")
	cmd.Stdin = strings.NewReader(string(req))
	cmd.ExtraFiles = []*os.File{result}
	out, err := cmd.Output()
	if len(out) != 0 {
		t.Fatalf("upload mode wrote %d bytes to stdout", len(out))
	}
	text, _ := os.ReadFile(result.Name())
	var answer map[string]json.RawMessage
	if jerr := json.Unmarshal(text, &answer); jerr != nil {
		t.Fatalf("answer %q: %v (exit: %v)", text, jerr, err)
	}
	return answer, parts, err
}

func TestPackUploadsItsArchiveInEqualParts(t *testing.T) {
	root := t.TempDir()
	data := make([]byte, 11<<20) // incompressible: three parts of 5 MiB, the last shorter
	rand.Read(data)
	os.WriteFile(filepath.Join(root, "blob"), data, 0o644)
	answer, parts, err := runPackUpload(t, root, 10)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Bytes  int64
		Sha256 string
		Parts  []struct {
			PartNumber, Bytes int
			ETag, Sha256      string
		}
	}
	raw, _ := json.Marshal(answer)
	json.Unmarshal(raw, &res)
	if len(res.Parts) != 3 || len(parts) != 3 {
		t.Fatalf("%d parts reported, %d stored", len(res.Parts), len(parts))
	}
	whole := sha256.New()
	for i, p := range res.Parts {
		got := parts[i+1]
		sum := sha256.Sum256(got)
		if p.PartNumber != i+1 || p.Bytes != len(got) || p.Sha256 != hex.EncodeToString(sum[:]) || p.ETag != fmt.Sprintf("etag-%d", i+1) {
			t.Fatalf("part %d: reported %+v, stored %d bytes", i+1, p, len(got))
		}
		if i < 2 && p.Bytes != 5<<20 {
			t.Fatalf("part %d has %d bytes", i+1, p.Bytes)
		}
		whole.Write(got)
	}
	if hex.EncodeToString(whole.Sum(nil)) != res.Sha256 {
		t.Fatal("the stored parts are not the archive the result names")
	}
}

func TestPackUploadWithTooFewURLsNamesUrls(t *testing.T) {
	root := t.TempDir()
	data := make([]byte, 11<<20)
	rand.Read(data)
	os.WriteFile(filepath.Join(root, "blob"), data, 0o644)
	answer, _, err := runPackUpload(t, root, 2)
	if err == nil {
		t.Fatal("pack succeeded with 2 URLs for 3 parts")
	}
	var failure struct {
		Error struct{ Code, Field, Message string }
	}
	raw, _ := json.Marshal(answer)
	json.Unmarshal(raw, &failure)
	if failure.Error.Code != "bad_request" || failure.Error.Field != "urls" {
		t.Fatalf("got %+v", failure)
	}
}

package main

import (
	"archive/tar"
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

	"github.com/klauspost/compress/zstd"
)

// runPackUpload runs `pack --part-size` over root with n part URLs of a test store (and the request's other fields
// from extra) and returns its fd-3 answer.
func runPackUpload(t *testing.T, root string, n int, extra map[string]any) (map[string]json.RawMessage, map[int][]byte, error) {
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
	fields := map[string]any{"level": 3, "urls": urls}
	for k, v := range extra {
		fields[k] = v
	}
	req, _ := json.Marshal(fields)
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
	answer, parts, err := runPackUpload(t, root, 10, nil)
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
	answer, _, err := runPackUpload(t, root, 2, nil)
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

// A delta in upload mode: the parts hold only what changed since the base (its kept manifest, checked against its
// SHA-256), and the answer is a delta's (what changed, the layer it wrote over the base), as in stream mode.
func TestPackUploadsADeltaOfWhatChanged(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "kept"), []byte("unchanged\n"), 0o644)
	os.WriteFile(filepath.Join(root, "edited"), []byte("before\n"), 0o644)
	base := filepath.Join(t.TempDir(), "base.json")
	full := exec.Command(binary, "pack", "--root", root, "--manifest", base, "--out", os.DevNull)
	full.Stdin = strings.NewReader(`{"level":3}`)
	if out, err := full.CombinedOutput(); err != nil {
		t.Fatalf("base pass: %v: %s", err, out)
	}
	raw, _ := os.ReadFile(base)
	sum := sha256.Sum256(raw)
	data := make([]byte, 6<<20) // incompressible: two parts of the delta, one of 5 MiB
	rand.Read(data)
	os.WriteFile(filepath.Join(root, "edited"), data, 0o644)
	delta := map[string]any{"base": base, "sha256": hex.EncodeToString(sum[:]), "layerOver": "bk-base"}
	answer, parts, err := runPackUpload(t, root, 4, map[string]any{"delta": delta})
	if err != nil {
		t.Fatalf("%v: %s", err, answer["error"])
	}
	var res struct {
		Archived int
		LayerOf  string
		Delta    struct{ Changed int }
		Parts    []struct{ PartNumber int }
	}
	j, _ := json.Marshal(answer)
	json.Unmarshal(j, &res)
	if res.Archived != 1 || res.Delta.Changed != 1 || res.LayerOf != "bk-base" || len(res.Parts) != 2 || len(parts) != 2 {
		t.Fatalf("answer %s; %d parts stored", j, len(parts))
	}
	// The parts make a tar.zst holding the edited file alone.
	dec, _ := zstd.NewReader(io.MultiReader(bytes.NewReader(parts[1]), bytes.NewReader(parts[2])))
	defer dec.Close()
	tr := tar.NewReader(dec)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if len(names) != 1 || names[0] != "./edited" {
		t.Fatalf("the delta's archive holds %q", names)
	}
}

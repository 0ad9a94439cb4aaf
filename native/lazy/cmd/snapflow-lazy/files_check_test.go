package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

type filesCheckAnswer struct {
	Equal, LayerOnly bool
	Files, Entries   int
	Bytes            int64
	Counts           map[string]int
	Differences      []struct{ Path, Kind, Field string }
	Error            *struct{ Code, Field, Message string }
}

func runFilesCheck(t *testing.T, root string, req map[string]any) filesCheckAnswer {
	t.Helper()
	req["idleSeconds"], req["retries"] = 5, 0
	body, _ := json.Marshal(req)
	result, _ := os.CreateTemp(t.TempDir(), "result")
	cmd := exec.Command(binary, "files-check", "--root", root, "--result-fd", "3")
	cmd.Stdin = bytes.NewReader(append(body, '\n'))
	cmd.ExtraFiles = []*os.File{result}
	err := cmd.Run()
	text, _ := os.ReadFile(result.Name())
	var a filesCheckAnswer
	if jerr := json.Unmarshal(text, &a); jerr != nil {
		t.Fatalf("answer %q: %v (exit: %v)", text, jerr, err)
	}
	return a
}

// A layered snapshot's content check costs its layer: with layerOnly only the names the layer sets are hashed, so a
// file beneath it is not read (its check was the index beneath's), and what the layer names is caught when it lies.
func TestFilesCheckHashesOnlyTheLayersNamesWhenAsked(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "unchanged a")
	write("b.txt", "b before")
	write("c.txt", "unchanged c")
	// A sparse file: its SHA-256 is of what a read returns, holes as zeros (the one files-check computes).
	sparse, _ := os.Create(filepath.Join(root, "sparse.bin"))
	sparse.Truncate(4 << 20)
	sparse.WriteAt([]byte("data past a hole"), 3<<20)
	sparse.Close()
	s := newPartStore()
	defer s.Close()
	first := t.TempDir()
	a, err := runFilesPack(t, s, root, first, map[string]any{"name": "s1"})
	if err != nil {
		t.Fatal(err)
	}
	write("b.txt", "b after, longer")
	write("d.txt", "new d")
	second := t.TempDir()
	b, err := runFilesPack(t, s, root, second, map[string]any{"name": "s2", "layer": true, "base": map[string]any{"file": filepath.Join(first, "index.zst"), "sha256": a.Index.Sha256}})
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]any{"file": filepath.Join(second, "index.zst"), "sha256": b.Index.Sha256, "chain": []map[string]any{{"file": filepath.Join(first, "index.zst"), "sha256": a.Index.Sha256}}}

	layer := runFilesCheck(t, root, map[string]any{"index": index, "layerOnly": true})
	whole := runFilesCheck(t, root, map[string]any{"index": index})
	if !layer.Equal || layer.Files != 2 || !layer.LayerOnly || !whole.Equal || whole.Files != 5 {
		t.Fatalf("an honest tree: layer-only %+v, whole %+v", layer, whole)
	}

	// A file beneath the layer changed: not the layer's to find (its index beneath was checked), the whole check's.
	write("c.txt", "changed c!!")
	if got := runFilesCheck(t, root, map[string]any{"index": index, "layerOnly": true}); !got.Equal || got.Files != 2 {
		t.Fatalf("layer-only read beneath its layer: %+v", got)
	}
	if got := runFilesCheck(t, root, map[string]any{"index": index}); got.Equal || len(got.Differences) != 1 || got.Differences[0].Path != "c.txt" || got.Differences[0].Field != "sha256" || got.Files != 5 {
		t.Fatalf("whole: %+v", got)
	}
	write("c.txt", "unchanged c")

	// What the layer names: content that is not the index's, a file gone, a symlink where a file was.
	write("d.txt", "NEW D")
	os.Remove(filepath.Join(root, "b.txt"))
	got := runFilesCheck(t, root, map[string]any{"index": index, "layerOnly": true})
	if got.Equal || got.Counts["missing"] != 1 || got.Counts["changed"] != 1 || got.Differences[0].Path != "b.txt" || got.Differences[1].Path != "d.txt" || got.Differences[1].Field != "sha256" {
		t.Fatalf("a lying layer: %+v", got)
	}
	os.Remove(filepath.Join(root, "d.txt"))
	os.Symlink("/etc/hostname", filepath.Join(root, "d.txt"))
	if got := runFilesCheck(t, root, map[string]any{"index": index, "layerOnly": true}); got.Equal || got.Differences[1].Path != "d.txt" || got.Differences[1].Field != "type" {
		t.Fatalf("a symlink where the layer has a file: %+v", got)
	}

	// A whole index has no layer to check alone.
	if got := runFilesCheck(t, root, map[string]any{"index": map[string]any{"file": filepath.Join(first, "index.zst"), "sha256": a.Index.Sha256}, "layerOnly": true}); got.Error == nil || got.Error.Field != "layerOnly" {
		t.Fatalf("layer-only of a whole index: %+v", got)
	}
}

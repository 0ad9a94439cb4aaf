package treesize

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCountBoundsTheTree(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b"), 0o755)
	os.WriteFile(filepath.Join(root, "a/b/f"), make([]byte, 1000), 0o644)
	os.WriteFile(filepath.Join(root, "g"), []byte("x"), 0o644)
	os.Symlink("a/b", filepath.Join(root, "link"))
	r, err := Count(root)
	if err != nil {
		t.Fatal(err)
	}
	// a, a/b, a/b/f, g, link; the symlink is not followed. Data blocks: 1024 (f) + 512 (g) + 512 (link), then the end blocks
	if r.Entries != 5 || r.Bytes != 1000+1+3 {
		t.Fatalf("got %+v", r)
	}
	if want := int64(1024 + 512 + 512 + 1024 + 5*TarOverheadPerEntry); r.TarMax != want {
		t.Fatalf("tarMax %d, want %d", r.TarMax, want)
	}
}

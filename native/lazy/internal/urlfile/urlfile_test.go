package urlfile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// write replaces the file whole, as the agent does (temporary file, rename).
func write(t *testing.T, path string, urls map[string]string) {
	t.Helper()
	b, _ := json.Marshal(urls)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func TestAwaitWaitsWhileMoreAreComing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "urls.json")
	write(t, path, map[string]string{"a": "http://store/a"})
	if err := os.WriteFile(MorePath(path), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		write(t, path, map[string]string{"a": "http://store/a", "b": "http://store/b"})
		_ = os.Remove(MorePath(path))
	}()
	started := time.Now()
	u, ok := f.Await(context.Background(), "b")
	if !ok || u != "http://store/b" {
		t.Fatalf("Await(b) = %q, %v; want the URL written later", u, ok)
	}
	if waited := time.Since(started); waited < 100*time.Millisecond {
		t.Fatalf("answered after %s, before the URL was written", waited)
	}
	// The marker is gone: a chunk nobody will sign is missing at once.
	started = time.Now()
	if u, ok := f.Await(context.Background(), "c"); ok {
		t.Fatalf("Await(c) = %q; want none", u)
	}
	if waited := time.Since(started); waited > 100*time.Millisecond {
		t.Fatalf("waited %s for a URL that is not coming", waited)
	}
}

func TestAwaitEndsWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "urls.json")
	write(t, path, map[string]string{})
	if err := os.WriteFile(MorePath(path), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, ok := f.Await(ctx, "x"); ok {
		t.Fatal("a URL that never came was found")
	}
	if ctx.Err() == nil {
		t.Fatal("returned before its context ended")
	}
}

package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"snapflow/native/lazy/internal/testkit"
)

// The agent lists only the chunks the store lacks; upload sends exactly those, verified, and reports what it sent.
func TestUploadPutsOnlyTheListedChunks(t *testing.T) {
	f := getFixture(t)
	store := testkit.NewStore(nil)
	defer store.Close()
	all := f.digests()
	want := all[:len(all)/2]
	urls := filepath.Join(t.TempDir(), "put-urls.json")
	if err := store.WriteURLs(urls, want, ""); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "upload", "--image", f.image, "--urls", urls, "--index", f.indexPath, "--concurrency", "4").Output()
	if err != nil {
		t.Fatalf("upload: %v %s", err, out)
	}
	var res struct{ Chunks, Bytes, Ms int64 }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if int(res.Chunks) != len(want) || store.Puts() != len(want) {
		t.Fatalf("uploaded %d chunks (%d PUTs), want %d", res.Chunks, store.Puts(), len(want))
	}
	for _, d := range want {
		if !store.Has(d) {
			t.Fatalf("chunk %s not stored", d)
		}
	}
	if store.Has(all[len(all)-1]) {
		t.Fatal("an unlisted chunk was uploaded")
	}
}

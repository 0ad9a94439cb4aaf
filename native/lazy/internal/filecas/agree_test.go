package filecas

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snapflow/native/lazy/internal/unpack"
)

// The index a backup made agrees with the manifest it made beside it; a manifest that says another hash, or lacks an
// entry, is refused before anything is made, naming the entry.
func TestAnIndexMustAgreeWithItsManifest(t *testing.T) {
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "d", "a"), random(1, 5000), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "b"), random(2, 70), 0o644))
	must(t, os.Symlink("d/a", filepath.Join(src, "l")))
	m, err := backup(t, src, "s1", nil)
	must(t, err)
	load := func(text []byte) *unpack.Expected {
		file := filepath.Join(t.TempDir(), "m.json")
		must(t, os.WriteFile(file, text, 0o644))
		x, err := unpack.LoadManifest(unpack.ManifestSource{File: file}, "manifest", 1<<20, func(string) (io.ReadCloser, error) { return nil, errors.New("no URL") })
		must(t, err)
		return x
	}
	if err := Agree(m.index, load(m.manifest)); err != nil {
		t.Fatalf("the backup's own manifest: %v", err)
	}
	var bSha string
	for _, e := range m.index.Entries {
		if e.Path == "b" {
			bSha = e.Sha256
		}
	}
	lying := bytes.Replace(m.manifest, []byte(bSha), []byte(strings.Repeat("0", 64)), 1)
	err = Agree(m.index, load(lying))
	if e := errCode(t, err, "verify_failed"); !strings.Contains(e.Message, `"b" differs in sha256`) {
		t.Fatalf("message %q", e.Message)
	}
	// An entry the manifest lacks (the index holds one more) is named too.
	fewer := bytes.Replace(m.manifest, []byte(`"path":"l"`), []byte(`"path":"m"`), 1)
	if e := errCode(t, Agree(m.index, load(fewer)), "verify_failed"); !strings.Contains(e.Message, `"l" is in the index, not in the manifest`) {
		t.Fatalf("message %q", e.Message)
	}
}

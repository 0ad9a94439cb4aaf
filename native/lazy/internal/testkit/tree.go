// Package testkit builds the real parts the tests run against: generated file trees, squashfs images made by mksquashfs,
// and an HTTP chunk store (httptest) that can corrupt, withhold or stall chunks. Nothing here stands in for our code.
package testkit

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Tree writes a deterministic node_modules-like tree: packages of small text files plus some incompressible binaries.
// bytes is the approximate total size.
func Tree(t testing.TB, dir string, seed int64, bytes int) {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	words := []string{"function", "return", "const", "module", "exports", "require", "undefined", "prototype", "=>", "{", "}", ";\n"}
	written := 0
	for pkg := 0; written < bytes; pkg++ {
		pdir := filepath.Join(dir, fmt.Sprintf("pkg-%03d", pkg), "lib")
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < 20 && written < bytes; f++ {
			var data []byte
			if f%7 == 6 { // a binary blob: squashfs cannot compress it, so it survives as image bytes
				data = make([]byte, 20_000+r.Intn(200_000))
				r.Read(data)
			} else {
				for n := 2_000 + r.Intn(30_000); len(data) < n; {
					data = append(data, words[r.Intn(len(words))]...)
					data = append(data, ' ')
					data = append(data, fmt.Sprint(r.Intn(1000))...)
				}
			}
			if err := os.WriteFile(filepath.Join(pdir, fmt.Sprintf("f%02d.js", f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
			written += len(data)
		}
	}
}

// Squashfs makes an image of src with the same options snapflow uses, plus fixed timestamps so it is reproducible.
func Squashfs(t testing.TB, src, image string) {
	t.Helper()
	if _, err := exec.LookPath("mksquashfs"); err != nil {
		t.Skip("mksquashfs not installed (apt-get install squashfs-tools)")
	}
	cmd := exec.Command("mksquashfs", src, image, "-comp", "zstd", "-Xcompression-level", "3", "-noappend",
		"-quiet", "-no-progress", "-all-time", "0", "-mkfs-time", "0", "-processors", "1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v\n%s", err, out)
	}
}

// NeedRootFUSE skips when FUSE mounts cannot be made here.
func NeedRootFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a FUSE filesystem and a kernel squashfs")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
}

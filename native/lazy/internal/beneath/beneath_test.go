package beneath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A target with a symlink `link -> ../outside` and a sentinel outside it, as a hostile base layer leaves it.
func hostileTree(t *testing.T) (target, outside string) {
	t.Helper()
	base := t.TempDir()
	target, outside = filepath.Join(base, "target"), filepath.Join(base, "outside")
	for _, d := range []string{target, outside, filepath.Join(target, "real")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(outside, "sentinel"), "untouched")
	write(t, filepath.Join(target, "real", "old"), "old")
	if err := os.Symlink("../outside", filepath.Join(target, "link")); err != nil {
		t.Fatal(err)
	}
	return target, outside
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, dir string) int {
	t.Helper()
	fd, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func sentinelIntact(t *testing.T, outside string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(outside, "sentinel"))
	if err != nil || string(got) != "untouched" {
		t.Fatalf("the sentinel outside changed: %q %v", got, err)
	}
}

func TestRemoveSkipsEntriesBelowASymlinkAndRemovesTheRest(t *testing.T) {
	target, outside := hostileTree(t)
	got, err := Remove(open(t, target), []string{"link/sentinel", "real/old", "link", "missing/x"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Removed != 2 || len(got.Skipped) != 2 || got.Skipped[0] != "link/sentinel" || got.Skipped[1] != "missing/x" {
		t.Fatalf("got %+v", got)
	}
	sentinelIntact(t, outside)
	if _, err := os.Lstat(filepath.Join(target, "link")); !os.IsNotExist(err) {
		t.Fatal("the symlink itself should be gone")
	}
}

func TestRemoveRefusesNamesThatLeadOut(t *testing.T) {
	target, _ := hostileTree(t)
	for _, bad := range []string{"../outside/sentinel", "/etc/passwd", "a/../../x", "", "a\x00b"} {
		if _, err := Remove(open(t, target), []string{"real/old", bad}); err == nil {
			t.Fatalf("%q was accepted", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(target, "real", "old")); err != nil {
		t.Fatal("a refused list removed something")
	}
}

func TestRemoveAllAtDoesNotFollowSymlinksInside(t *testing.T) {
	target, outside := hostileTree(t)
	if err := os.Symlink(outside, filepath.Join(target, "real", "out")); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAllAt(open(t, target), "real"); err != nil {
		t.Fatal(err)
	}
	sentinelIntact(t, outside)
}

func TestMergeReplacesASymlinkInTheWayAndMergesDirectories(t *testing.T) {
	target, outside := hostileTree(t)
	staging := t.TempDir()
	os.MkdirAll(filepath.Join(staging, "link"), 0o755)
	write(t, filepath.Join(staging, "link", "sentinel"), "from the layer")
	os.MkdirAll(filepath.Join(staging, "real"), 0o700)
	write(t, filepath.Join(staging, "real", "new"), "new")
	archived := time.Unix(1_600_000_000, 0) // whole seconds, before the extraction: an archive entry, as tar sets it
	os.Chtimes(filepath.Join(staging, "real"), archived, archived)
	moved, err := Merge(open(t, staging), open(t, target), MergeOptions{ExtractedAtMs: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2 {
		t.Fatalf("moved %d", moved)
	}
	sentinelIntact(t, outside)
	if st, err := os.Lstat(filepath.Join(target, "link")); err != nil || !st.IsDir() {
		t.Fatal("the symlink should have been replaced by the layer's directory")
	}
	for _, f := range []string{"real/old", "real/new"} {
		if _, err := os.Stat(filepath.Join(target, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if st, _ := os.Stat(filepath.Join(target, "real")); st.Mode().Perm() != 0o700 || !st.ModTime().Equal(archived) {
		t.Fatalf("real has mode %v, mtime %v: not the archived directory's", st.Mode().Perm(), st.ModTime())
	}
}

func TestOpenDirBeneathRefusesSymlinksOnTheWay(t *testing.T) {
	target, _ := hostileTree(t)
	root := open(t, target)
	if _, err := OpenDirBeneath(root, "link"); err == nil {
		t.Fatal("opened through a symlink")
	}
	fd, err := OpenDirBeneath(root, "real")
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	noOpenat2 = true
	defer func() { noOpenat2 = false }()
	if _, err := OpenDirBeneath(root, "link"); err == nil {
		t.Fatal("the component walk opened through a symlink")
	}
}

// Setting a trusted.* xattr needs CAP_SYS_ADMIN (the agent runs as root); the refusals below need nothing.
func TestMarkOpaqueMarksTheListedDirectoriesOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("trusted.* xattrs need root")
	}
	root := t.TempDir()
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// Twice: a retried restore step marks again.
	for range 2 {
		if n, err := MarkOpaque(fd, []string{"a/b", "c"}); err != nil || n != 2 {
			t.Fatalf("marked %d: %v", n, err)
		}
	}
	buf := make([]byte, 8)
	for _, d := range []string{"a/b", "c"} {
		n, err := unix.Lgetxattr(filepath.Join(root, d), OpaqueXattr, buf)
		if err != nil || string(buf[:n]) != "y" {
			t.Fatalf("%s: %q %v", d, buf[:max(n, 0)], err)
		}
	}
	if _, err := unix.Lgetxattr(filepath.Join(root, "a"), OpaqueXattr, buf); err == nil {
		t.Fatal("a was marked too")
	}
}

// The upper came from another sandbox's archive: a listed name that is a symlink (last or on the way), a file, or
// missing is an error naming it, and nothing outside the root is marked.
func TestMarkOpaqueRefusesSymlinksAndWhatIsNotADirectoryBelow(t *testing.T) {
	target, outside := hostileTree(t) // target/link -> ../outside
	write(t, filepath.Join(target, "file"), "not a directory")
	if err := os.MkdirAll(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenRoot(target)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, bad := range []string{"link", "link/sub", "file", "missing", "real/missing"} {
		_, err := MarkOpaque(fd, []string{bad})
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	buf := make([]byte, 8)
	for _, p := range []string{outside, filepath.Join(outside, "sub")} {
		if _, err := unix.Lgetxattr(p, OpaqueXattr, buf); err == nil {
			t.Fatalf("%s, a symlink's target, was marked", p)
		}
	}
	// Names that lead out, or are no name, are refused before anything is opened.
	for _, bad := range []string{"../x", "real/../../x", "/abs", "", "a\x00b"} {
		if _, err := MarkOpaque(fd, []string{"real", bad}); err == nil {
			t.Fatalf("%q was accepted", bad)
		}
	}
	if _, err := unix.Lgetxattr(filepath.Join(target, "real"), OpaqueXattr, buf); err == nil {
		t.Fatal("a list with a bad name was partly marked")
	}
}

// Archives carry nanosecond mtimes (pax): an archived directory modified just before the backup has a recent,
// sub-second mtime, and must still be told from one tar only made on the way (whose own times the target keeps).
func TestMergeAppliesARecentNanosecondMtimeOfAnArchivedDirectory(t *testing.T) {
	target := t.TempDir()
	os.MkdirAll(filepath.Join(target, "dir"), 0o755)
	old := time.Unix(1_600_000_000, 0)
	os.Chtimes(filepath.Join(target, "dir"), old, old)
	staging := t.TempDir()
	extractedAt := time.Now()
	archived := extractedAt.Add(-300 * time.Millisecond).Truncate(time.Nanosecond).Add(123) // set after the directory was made, as tar does
	os.MkdirAll(filepath.Join(staging, "dir"), 0o755)
	write(t, filepath.Join(staging, "dir", "new"), "new")
	os.Chtimes(filepath.Join(staging, "dir"), archived, archived)
	os.MkdirAll(filepath.Join(staging, "made", "on-the-way"), 0o755) // tar made "made" for its entry below: no times of its own
	write(t, filepath.Join(staging, "made", "on-the-way", "f"), "f")
	os.MkdirAll(filepath.Join(target, "made"), 0o755)
	os.Chtimes(filepath.Join(target, "made"), old, old)
	if _, err := Merge(open(t, staging), open(t, target), MergeOptions{ExtractedAtMs: extractedAt.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(target, "dir")); !st.ModTime().Equal(archived) {
		t.Fatalf("dir has mtime %v, not the archived %v", st.ModTime(), archived)
	}
	if st, _ := os.Stat(filepath.Join(target, "made")); !st.ModTime().Equal(old) {
		t.Fatalf("made (not an archive entry) has mtime %v, not its own %v", st.ModTime(), old)
	}
}

package beneath

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The erofs attack of issue 21: a name in the image's listing leads through a symlink the extraction made
// (`link -> ../outside`), and the passes after extraction are handed it as if it were inside.

func TestRelinkNeverLinksAFileFromOutsideIn(t *testing.T) {
	target, outside := hostileTree(t)
	write(t, filepath.Join(target, "real", "copy"), "untouched") // the sentinel's size, as an attacker would pick
	for _, group := range [][]string{{"link/sentinel", "real/copy"}, {"real/copy", "link/sentinel"}} {
		if _, err := Relink(open(t, target), [][]string{group}); err == nil {
			t.Fatalf("%v: relinked through a symlink", group)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(outside, "sentinel"), &st); err != nil || st.Nlink != 1 {
		t.Fatalf("the outside file gained a link: nlink %d %v", st.Nlink, err)
	}
	sentinelIntact(t, outside)
}

func TestRelinkMakesCopiesOneFileAndKeepsTheParentsTimes(t *testing.T) {
	target, _ := hostileTree(t)
	write(t, filepath.Join(target, "real", "a"), "same")
	write(t, filepath.Join(target, "real", "b"), "same")
	old := time.Unix(1_600_000_000, 123_456_789)
	if err := os.Chtimes(filepath.Join(target, "real"), old, old); err != nil {
		t.Fatal(err)
	}
	n, err := Relink(open(t, target), [][]string{{"real/a", "real/b"}})
	if err != nil || n != 1 {
		t.Fatalf("relinked %d, %v", n, err)
	}
	a, _ := os.Stat(filepath.Join(target, "real", "a"))
	b, _ := os.Stat(filepath.Join(target, "real", "b"))
	if !os.SameFile(a, b) {
		t.Fatal("not one file")
	}
	if d, _ := os.Stat(filepath.Join(target, "real")); !d.ModTime().Equal(old) {
		t.Fatalf("parent mtime %v, want %v", d.ModTime(), old)
	}
}

func TestSetModesNeverFollowsASymlink(t *testing.T) {
	target, outside := hostileTree(t)
	if err := os.Symlink("../outside/sentinel", filepath.Join(target, "real", "ln")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(target, "real", "prog"), "#!/bin/sh\n")
	set, skipped, err := SetModes(open(t, target), []ModeOf{{"link/sentinel", 0o4755}, {"real/ln", 0o4755}, {"real/prog", 0o4755}})
	if err != nil || set != 1 || len(skipped) != 2 {
		t.Fatalf("set %d skipped %v %v", set, skipped, err)
	}
	if st, _ := os.Stat(filepath.Join(outside, "sentinel")); st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || st.Mode().Perm() != 0o644 {
		t.Fatalf("the outside file's mode changed: %v", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(target, "real", "prog")); st.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("real/prog: %v", st.Mode())
	}
	if _, _, err := SetModes(open(t, target), []ModeOf{{"../outside/sentinel", 0o644}}); err == nil {
		t.Fatal("a name with '..' was accepted")
	}
}

func TestSanitizeActsOnSymlinksNotTheirTargets(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	target, outside := hostileTree(t)
	sentinel := filepath.Join(outside, "sentinel")
	if err := os.Chown(sentinel, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(sentinel, 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/sentinel", filepath.Join(target, "real", "ln")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(target, "real", "ln"), 4242, 4343); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(target, "real", "suid"), "x")
	if err := unix.Chmod(filepath.Join(target, "real", "suid"), 0o6755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(target, "real", "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(target, "whiteout"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	got, err := Sanitize(open(t, target), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.DevicesRemoved) != 1 || got.DevicesRemoved[0] != "real/null" || len(got.SetidCleared) != 1 || got.SetidCleared[0] != "real/suid" || got.OwnersReset != 1 {
		t.Fatalf("got %+v", got)
	}
	var st unix.Stat_t
	if err := unix.Stat(sentinel, &st); err != nil || st.Uid != 4242 || st.Mode&0o7777 != 0o4755 {
		t.Fatalf("the outside file changed: uid %d mode %o %v", st.Uid, st.Mode&0o7777, err)
	}
	if err := unix.Lstat(filepath.Join(target, "real", "ln"), &st); err != nil || st.Uid != 0 {
		t.Fatalf("the symlink itself keeps uid %d", st.Uid)
	}
	if _, err := os.Lstat(filepath.Join(target, "whiteout")); err != nil {
		t.Fatal("an overlay whiteout was removed")
	}
}

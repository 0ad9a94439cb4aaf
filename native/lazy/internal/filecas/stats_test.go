package filecas

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// A tree restored from an index, then backed up with that index as its base: with the restored tree's stat keys no
// file is read (and nothing stored); without them every file is; with one file changed since, that file alone.
func TestARestoredTreesStatKeysSpareTheNextBackupItsReads(t *testing.T) {
	unix.Umask(0)
	src := t.TempDir()
	for i, size := range []int{10, 5000, 70000} {
		must(t, os.MkdirAll(filepath.Join(src, "d"), 0o755))
		must(t, os.WriteFile(filepath.Join(src, "d", string(rune('a'+i))), random(int64(i), size), 0o644))
	}
	first, err := backup(t, src, "s1", nil)
	must(t, err)
	s := serve(t, map[string][]byte{"s1": first.pack})
	root := emptyRoot(t)
	res, err := Unpack(context.Background(), first.index, UnpackOptions{Root: root, Packs: map[string]string{"s1": s.srv.URL + "/s1"}, Idle: 2e9, Retries: 1, Concurrency: 2})
	must(t, err)
	if !res.Equal {
		t.Fatalf("restore not equal: %+v", res)
	}
	stats := filepath.Join(t.TempDir(), "s1.fidx.stat.zst")
	n, err := WriteStats(root, first.index, first.res.Index.Sha256, stats)
	must(t, err)
	if n != 3 {
		t.Fatalf("%d files' keys written, want 3", n)
	}

	without, err := backup(t, root, "s2", baseOf(first))
	must(t, err)
	if len(without.opened) != 3 {
		t.Fatalf("without the restored keys %v were read, want all 3", without.opened)
	}
	base := baseOf(first)
	base.Stat = stats
	with, err := backup(t, root, "s3", base)
	must(t, err)
	if len(with.opened) != 0 || with.res.Pack != nil {
		t.Fatalf("with the restored keys %v were read (pack %+v), want none", with.opened, with.res.Pack)
	}
	// Keys of another index are not taken.
	other := baseOf(first)
	other.Stat = stats
	must(t, os.WriteFile(filepath.Join(root, "d", "b"), random(99, 5000), 0o644))
	changed, err := backup(t, root, "s4", other)
	must(t, err)
	if !slices.Equal(changed.opened, []string{"d/b"}) {
		t.Fatalf("after one change %v were read, want [d/b]", changed.opened)
	}
	if _, err := applyStats(first.index, "0000000000000000000000000000000000000000000000000000000000000000", stats); err != nil {
		t.Fatal(err)
	}
}

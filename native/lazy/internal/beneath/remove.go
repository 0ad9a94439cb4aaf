package beneath

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Removal is what Remove did: entries removed (or already absent), and entries left alone because a component on
// their way is a symlink or not a directory (so nothing of that name is below the root).
type Removal struct {
	Removed int      `json:"removed"`
	Skipped []string `json:"skipped"`
}

// Remove removes each relative entry below root, with everything below it. The entry's parent is opened beneath
// root without following a symlink; the entry itself is removed relative to that descriptor (a symlink is removed,
// never followed). Names with "..", absolute names and NULs are refused before anything is removed.
func Remove(root int, entries []string) (Removal, error) {
	for i, rel := range entries {
		if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "\x00") || containsDotDot(rel) {
			return Removal{}, fmt.Errorf("entries.%d must be a relative path inside the tree, got %q", i, rel)
		}
	}
	out := Removal{Skipped: []string{}}
	for _, rel := range entries {
		var parts []string
		for _, p := range strings.Split(rel, "/") {
			if p != "" && p != "." {
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			out.Skipped = append(out.Skipped, rel)
			continue
		}
		parent, err := OpenDirBeneath(root, strings.Join(parts[:len(parts)-1], "/"))
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EXDEV) {
			out.Skipped = append(out.Skipped, rel)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", rel, err)
		}
		err = RemoveAllAt(parent, parts[len(parts)-1])
		unix.Close(parent)
		if err != nil {
			return out, fmt.Errorf("%s: %w", rel, err)
		}
		out.Removed++
	}
	return out, nil
}

func containsDotDot(rel string) bool {
	for _, p := range strings.Split(rel, "/") {
		if p == ".." {
			return true
		}
	}
	return false
}

package beneath

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// OpaqueXattr is overlayfs' mark on an upper directory that hides the lower one's entries: a directory deleted and made
// again in the overlay. tar does not carry it, so a restored upper gets it back from the layer manifest.
const OpaqueXattr = "trusted.overlay.opaque"

// MarkOpaque sets the opaque mark on each directory (relative to root, '/'-separated), opened beneath root without
// following a symlink: the upper came from another sandbox's archive, and a name it made a symlink must not carry the
// mark (or the write) elsewhere. A name that is not a directory below root is an error naming it: the archive and the
// manifest disagree, and the restore must not guess.
func MarkOpaque(root int, dirs []string) (int, error) {
	for i, rel := range dirs {
		if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "\x00") || containsDotDot(rel) {
			return 0, fmt.Errorf("dirs.%d must be a relative path inside the tree, got %q", i, rel)
		}
	}
	for n, rel := range dirs {
		fd, err := OpenDirBeneath(root, rel)
		if err != nil {
			return n, fmt.Errorf("%s: not a directory below the upper (%w)", rel, err)
		}
		err = unix.Fsetxattr(fd, OpaqueXattr, []byte("y"), 0)
		unix.Close(fd)
		if err != nil {
			return n, fmt.Errorf("%s: setting %s: %w", rel, OpaqueXattr, err)
		}
	}
	return len(dirs), nil
}

package beneath

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// checkRel refuses a name that could not be below a root as written: empty, absolute, holding '..' or a NUL.
func checkRel(field, rel string) error {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "\x00") || containsDotDot(rel) {
		return fmt.Errorf("%s must be a relative path inside the tree, got %q", field, rel)
	}
	return nil
}

// splitRel answers rel's parent ('/'-separated, "" for the root) and its last component.
func splitRel(rel string) (string, string) {
	rel = strings.Trim(rel, "/")
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return "", rel
}

// openParent opens rel's parent beneath root (no symlink followed on the way) and answers it with rel's last
// component, which the caller acts on relative to it and never follows.
func openParent(root int, rel string) (int, string, error) {
	dir, name := splitRel(rel)
	fd, err := OpenDirBeneath(root, dir)
	return fd, name, err
}

// lstatAt is fstatat without following a symlink in the last component.
func lstatAt(dir int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// openFileAt opens the regular file `name` in dir without following a symlink (O_NOFOLLOW) or blocking on a FIFO
// (O_NONBLOCK), and checks it is the inode `want` was stat'ed as; a swap in between is an error, never a redirect.
func openFileAt(dir int, name string, want *unix.Stat_t) (int, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != want.Dev || st.Ino != want.Ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%s changed while it was being opened", name)
	}
	return fd, nil
}

func isReg(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }

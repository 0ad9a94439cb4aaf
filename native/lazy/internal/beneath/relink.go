package beneath

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Relink makes each group of names (relative to root, '/'-separated) one file again: every name after the first
// becomes a hard link to the first. It serves an extractor that writes each name of a hard-linked inode as its own
// copy (fsck.erofs before 1.7). The names come from an image another sandbox made, so each one's parent is opened
// beneath root without following a symlink, and the link is made between those descriptors (linkat without
// AT_SYMLINK_FOLLOW): a name that leads through a symlink cannot be opened, so nothing outside the root is ever
// linked in. Answers how many names were relinked (names already one inode are left as they are).
func Relink(root int, groups [][]string) (int, error) {
	for i, g := range groups {
		for j, rel := range g {
			if err := checkRel(fmt.Sprintf("groups.%d.%d", i, j), rel); err != nil {
				return 0, err
			}
		}
	}
	relinked := 0
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		n, err := relinkGroup(root, g)
		relinked += n
		if err != nil {
			return relinked, err
		}
	}
	return relinked, nil
}

func relinkGroup(root int, names []string) (int, error) {
	first, firstName, err := openParent(root, names[0])
	if err != nil {
		return 0, fmt.Errorf("%s: not below the extracted tree without a symlink (%w)", names[0], err)
	}
	defer unix.Close(first)
	src, err := lstatAt(first, firstName)
	if err != nil || !isReg(&src) {
		return 0, fmt.Errorf("%s: not a regular file in the extracted tree (%v)", names[0], err)
	}
	n := 0
	for _, other := range names[1:] {
		done, err := relinkOne(root, first, firstName, &src, other)
		if err != nil {
			return n, fmt.Errorf("%s → %s: %w", other, names[0], err)
		}
		if done {
			n++
		}
	}
	return n, nil
}

// relinkOne replaces `other` with a hard link to first/firstName, keeping other's parent directory's times (which
// adding and renaming a name changes).
func relinkOne(root, first int, firstName string, src *unix.Stat_t, other string) (bool, error) {
	parent, name, err := openParent(root, other)
	if err != nil {
		return false, fmt.Errorf("not below the extracted tree without a symlink (%w)", err)
	}
	defer unix.Close(parent)
	dst, err := lstatAt(parent, name)
	if err != nil {
		return false, err
	}
	if dst.Dev == src.Dev && dst.Ino == src.Ino {
		return false, nil
	}
	if !isReg(&dst) || dst.Size != src.Size {
		return false, errors.New("one inode in the image, but different files after extraction")
	}
	var dirSt unix.Stat_t
	if err := unix.Fstat(parent, &dirSt); err != nil {
		return false, err
	}
	tmp := make([]byte, 6)
	if _, err := rand.Read(tmp); err != nil {
		return false, err
	}
	temp := ".snapflow-link-" + hex.EncodeToString(tmp)
	if err := unix.Linkat(first, firstName, parent, temp, 0); err != nil {
		return false, err
	}
	if err := unix.Renameat(parent, temp, parent, name); err != nil {
		unix.Unlinkat(parent, temp, 0)
		return false, err
	}
	return true, setDirTimes(parent, &dirSt)
}

// setDirTimes gives the held directory the access and modification times in st. utimensat on the descriptor itself
// (its /proc/self/fd link, which names the directory held, not a path that could be swapped).
func setDirTimes(dir int, st *unix.Stat_t) error {
	return unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", dir), []unix.Timespec{st.Atim, st.Mtim}, 0)
}

package beneath

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ModeOf is one file's permission bits (with setuid/setgid/sticky), as an image's inode has them.
type ModeOf struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
}

// SetModes sets each regular file's mode through a descriptor: the file's parent is opened beneath root without
// following a symlink, the file itself with O_NOFOLLOW and checked to be the regular file stat'ed, then fchmod. A
// name that is not a regular file below root without a symlink is skipped (answered), never followed. It serves a
// restore that keeps owners: an extractor that sets a file's mode before its owner loses setuid/setgid to chown.
func SetModes(root int, files []ModeOf) (set int, skipped []string, err error) {
	skipped = []string{}
	for i, f := range files {
		if err := checkRel(fmt.Sprintf("files.%d.path", i), f.Path); err != nil {
			return 0, skipped, err
		}
		if f.Mode&^0o7777 != 0 {
			return 0, skipped, fmt.Errorf("files.%d.mode must be permission bits only, got %o", i, f.Mode)
		}
	}
	for _, f := range files {
		ok, err := setModeBeneath(root, f)
		if err != nil {
			return set, skipped, fmt.Errorf("%s: %w", f.Path, err)
		}
		if ok {
			set++
		} else {
			skipped = append(skipped, f.Path)
		}
	}
	return set, skipped, nil
}

func setModeBeneath(root int, f ModeOf) (bool, error) {
	parent, name, err := openParent(root, f.Path)
	if err != nil {
		return false, nil
	}
	defer unix.Close(parent)
	st, err := lstatAt(parent, name)
	if err != nil || !isReg(&st) {
		return false, nil
	}
	fd, err := openFileAt(parent, name, &st)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	return true, unix.Fchmod(fd, f.Mode)
}

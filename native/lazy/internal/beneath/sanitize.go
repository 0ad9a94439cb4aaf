package beneath

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Sanitized is what Sanitize changed, by relative name.
type Sanitized struct {
	DevicesRemoved []string `json:"devicesRemoved"`
	SetidCleared   []string `json:"setidCleared"`
	// entries whose owner or group was not the caller's, given back to it
	OwnersReset int `json:"ownersReset"`
}

// Sanitize cleans a freshly extracted tree of what a restore must not plant, whoever made the archive: device
// nodes (removed; a char device 0/0 is an overlay whiteout and stays), and unless keepOwners, foreign owners (given
// to the caller, the symlink itself and never its target) and setuid/setgid bits on files (cleared; directories
// keep setgid, group inheritance). The walk holds each directory by a descriptor opened from its parent with
// O_NOFOLLOW and acts on entries relative to it, so a symlink in the tree, or one swapped in meanwhile, is never
// followed out of root.
func Sanitize(root int, keepOwners bool) (Sanitized, error) {
	out := Sanitized{DevicesRemoved: []string{}, SetidCleared: []string{}}
	err := sanitizeDir(root, "", keepOwners, os.Getuid(), os.Getgid(), &out)
	return out, err
}

func sanitizeDir(dir int, rel string, keepOwners bool, uid, gid int, out *Sanitized) error {
	names, err := Names(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", shownRel(rel), err)
	}
	for _, name := range names {
		shown := name
		if rel != "" {
			shown = rel + "/" + name
		}
		st, err := lstatAt(dir, name)
		if err != nil {
			return fmt.Errorf("%s: %w", shown, err)
		}
		kind := st.Mode & unix.S_IFMT
		if (kind == unix.S_IFCHR && st.Rdev != 0) || kind == unix.S_IFBLK {
			if err := unix.Unlinkat(dir, name, 0); err != nil {
				return fmt.Errorf("%s: %w", shown, err)
			}
			out.DevicesRemoved = append(out.DevicesRemoved, shown)
			continue
		}
		if !keepOwners && (int(st.Uid) != uid || int(st.Gid) != gid) {
			if err := unix.Fchownat(dir, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("%s: %w", shown, err)
			}
			out.OwnersReset++
		}
		switch {
		case kind == unix.S_IFDIR:
			sub, err := openDirAt(dir, name)
			if err != nil {
				return fmt.Errorf("%s: %w", shown, err)
			}
			err = sanitizeDir(sub, shown, keepOwners, uid, gid, out)
			unix.Close(sub)
			if err != nil {
				return err
			}
		case !keepOwners && kind == unix.S_IFREG && st.Mode&0o6000 != 0:
			// chown above may already have cleared them (the kernel does for non-directories); say so either way.
			fd, err := openFileAt(dir, name, &st)
			if err != nil {
				return fmt.Errorf("%s: %w", shown, err)
			}
			err = unix.Fchmod(fd, st.Mode&0o1777)
			unix.Close(fd)
			if err != nil {
				return fmt.Errorf("%s: %w", shown, err)
			}
			out.SetidCleared = append(out.SetidCleared, shown)
		}
	}
	return nil
}

func shownRel(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

package beneath

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// MergeOptions: ExtractedAtMs is when extraction into the staging directory began; KeepOwners gives a directory
// that was an archive entry its archived owner too (owners of moved entries travel with them anyway).
type MergeOptions struct {
	ExtractedAtMs int64
	KeepOwners    bool
}

// madeOnTheWay: a directory tar made itself (for `a/b`, not as entry `a`) keeps its own times, taken when it was
// made or filled: its mtime is at or after its birth. tar sets an archive entry's mtime to the archive's, from
// before the backup and so before the directory was born here. Archives carry nanoseconds (pax), so a directory
// changed just before the backup has a recent, sub-second mtime: the birth time tells them apart where the old rule
// (sub-second and recent means made on the way) could not. Without a birth time (statx STATX_BTIME unsupported)
// the old rule stands.
func madeOnTheWay(staging int, name string, st *unix.Stat_t, extractedAtMs int64) bool {
	// st was taken before the merge emptied the directory (which moved its mtime to now); birth does not move.
	var stx unix.Statx_t
	if err := unix.Statx(staging, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx); err == nil && stx.Mask&unix.STATX_BTIME != 0 {
		m, b := st.Mtim, stx.Btime
		return m.Sec > b.Sec || (m.Sec == b.Sec && m.Nsec >= int64(b.Nsec))
	}
	ms := st.Mtim.Sec*1000 + st.Mtim.Nsec/1e6
	return st.Mtim.Nsec != 0 && ms >= extractedAtMs-1000
}

// Merge moves everything in the staging directory into the target directory and answers the entries moved. Both
// real directories: go down, then set the target directory's mode and times (the archive's, or its own when tar only
// made it on the way). Anything else in the way (a file, a symlink, a directory a non-directory replaces) is removed
// and the staged entry renamed into its place: rename replaces a name, it never follows one.
func Merge(staging, target int, o MergeOptions) (int, error) {
	names, err := Names(staging)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, name := range names {
		var src, dst unix.Stat_t
		if err := unix.Fstatat(staging, name, &src, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return moved, fmt.Errorf("%s: %w", name, err)
		}
		dstErr := unix.Fstatat(target, name, &dst, unix.AT_SYMLINK_NOFOLLOW)
		if isDir(&src) && dstErr == nil && isDir(&dst) {
			n, done, err := mergeDir(staging, target, name, &src, &dst, o)
			if err != nil {
				return moved, err
			}
			if done {
				moved += n
				continue
			}
			// swapped for a non-directory since the stat: replace it like any other
		}
		if err := replaceWith(staging, target, name); err != nil {
			return moved, fmt.Errorf("%s: %w", name, err)
		}
		moved++
	}
	return moved, nil
}

// mergeDir merges staging/name into target/name, both directories when they were stat'ed; done is false when
// target/name is no longer a directory by the time it is opened.
func mergeDir(staging, target int, name string, src, dst *unix.Stat_t, o MergeOptions) (int, bool, error) {
	to, err := openDirAt(target, name)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", name, err)
	}
	defer unix.Close(to)
	from, err := openDirAt(staging, name)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", name, err)
	}
	n, err := Merge(from, to, o)
	unix.Close(from)
	if err != nil {
		return n, true, fmt.Errorf("%s/%w", name, err)
	}
	attrs := src
	if madeOnTheWay(staging, name, src, o.ExtractedAtMs) {
		attrs = dst
	} else if o.KeepOwners {
		// Before the mode: chown may clear set-id bits.
		if err := unix.Fchown(to, int(src.Uid), int(src.Gid)); err != nil {
			return n, true, fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := unix.Fchmod(to, attrs.Mode&0o7777); err != nil {
		return n, true, fmt.Errorf("%s: %w", name, err)
	}
	// By name relative to the held parent, never following: if the name was swapped meanwhile, the times land on
	// whatever the tree's code put there, inside the target.
	times := []unix.Timespec{attrs.Atim, attrs.Mtim}
	if err := unix.UtimesNanoAt(target, name, times, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
		return n, true, fmt.Errorf("%s: %w", name, err)
	}
	return n, true, nil
}

// replaceWith removes whatever is at target/name and renames staging/name there; something the tree's code puts
// back in between is removed again, a bounded number of times.
func replaceWith(staging, target int, name string) error {
	var err error
	for range 8 {
		if err = unix.Renameat(staging, name, target, name); err == nil {
			return nil
		}
		if !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.ENOTDIR) {
			return err
		}
		if err := RemoveAllAt(target, name); err != nil {
			return err
		}
	}
	return err
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

package pack

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
)

// walked is one entry of a delta's walk, from lstat alone (the agent's tree-walk.ts WalkEntry): what the
// classification compares with the base's entry, and the key the manifest records.
type walked struct {
	path   string
	st     unix.Stat_t
	target string
	// link: a later name of a file with several links, the first name the walk met (as tar would archive it)
	link string
}

func (w *walked) kind() string {
	switch w.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
}

func (w *walked) mode() uint32 { return w.st.Mode & 0o7777 }

// size is lstat's, but 0 for a directory (as the walk and the manifest have it).
func (w *walked) size() int64 {
	if w.st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return 0
	}
	return w.st.Size
}

// mtime is whole seconds, floored (the walk's; the manifest's own may round as node-tar reads a pax time: such a file
// compares as changed, as it does in the agent's pass).
func (w *walked) mtime() int64 { return w.st.Mtim.Sec }

// sameKey: the base recorded this entry's lstat key (inode, device, ns mtime and ctime) and it has not moved.
func (w *walked) sameKey(s *Stat) bool {
	if s == nil {
		return false
	}
	var buf [24]byte
	return string(strconv.AppendUint(buf[:0], w.st.Ino, 10)) == s.Ino &&
		string(strconv.AppendUint(buf[:0], w.st.Dev, 10)) == s.Dev &&
		string(strconv.AppendInt(buf[:0], w.st.Mtim.Nano(), 10)) == s.MtimeNs &&
		string(strconv.AppendInt(buf[:0], w.st.Ctim.Nano(), 10)) == s.CtimeNs
}

func (w *walked) stat() Stat {
	return Stat{
		Ino: strconv.FormatUint(w.st.Ino, 10), Dev: strconv.FormatUint(w.st.Dev, 10),
		MtimeNs: strconv.FormatInt(w.st.Mtim.Nano(), 10), CtimeNs: strconv.FormatInt(w.st.Ctim.Nano(), 10),
	}
}

// walkTree lists every entry below the directory fd holds that the selection keeps, depth first in the agent's order,
// from lstat alone. Sockets are left out (tar cannot archive them: a base entry that is one now counts as deleted),
// and so are the pass's own manifest files.
func (p *packer) walkTree(fd int, rel, host string, out *[]walked, firstName map[[2]uint64]string) error {
	names, err := readNames(fd, host)
	if err != nil {
		return err
	}
	for _, name := range names {
		entryRel := name
		if rel != "" {
			entryRel = rel + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if gone(err) {
				continue
			}
			return fmt.Errorf("lstat %s: %w", filepath.Join(host, name), err)
		}
		kind := st.Mode & unix.S_IFMT
		if kind == unix.S_IFSOCK || (kind == unix.S_IFREG && p.ownFile(&st)) {
			continue
		}
		if p.sel.excluded(entryRel, kind == unix.S_IFDIR, fd, name) {
			continue
		}
		w := walked{path: entryRel, st: st}
		switch kind {
		case unix.S_IFLNK:
			target, err := readlinkat(fd, name)
			if gone(err) || errors.Is(err, unix.EINVAL) {
				continue // removed (or replaced) since its lstat
			}
			if err != nil {
				return fmt.Errorf("readlink %s: %w", filepath.Join(host, name), err)
			}
			w.target = target
		case unix.S_IFREG:
			if st.Nlink > 1 {
				key := [2]uint64{st.Dev, st.Ino}
				if first, ok := firstName[key]; ok {
					w.link = first
				} else {
					firstName[key] = entryRel
				}
			}
		}
		*out = append(*out, w)
		if kind != unix.S_IFDIR || (p.descend != nil && !p.descend(entryRel)) {
			continue
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if gone(err) || errors.Is(err, unix.ELOOP) {
			continue // removed or swapped for a symlink since: nothing below it to walk (never followed)
		}
		if err != nil {
			return fmt.Errorf("open directory %s: %w", filepath.Join(host, name), err)
		}
		err = p.walkTree(sub, entryRel, filepath.Join(host, name), out, firstName)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// readNames is a directory's names in the agent's order; a name that is not UTF-8 is refused as the agent refuses it.
func readNames(fd int, host string) ([]string, error) {
	names, err := beneath.Names(fd)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", host, err)
	}
	sortNames(names)
	for _, name := range names {
		if !utf8.ValidString(name) {
			return nil, notUTF8(host, name)
		}
	}
	return names, nil
}

func notUTF8(host, name string) error {
	return &Error{Code: "bad_request", Field: "path", Message: fmt.Sprintf("path: %s holds a name that is not UTF-8 (read as %s); snapflow names entries in UTF-8 and would lose it: rename it, or exclude it", host, strconv.Quote(undecodable(name)))}
}

package filecas

// A restored tree's stat keys. An index made in one sandbox carries that sandbox's inodes, devices and ctimes, so in
// a sandbox restored from it every file looks changed to restic's rule and the next backup would read the whole tree
// again, although most files are byte for byte what the index says. files-unpack therefore writes, beside the tree
// it made, the lstat key of each regular file as made there (StatsFile), bound to the SHA-256 of the index it
// restored; files-pack, given it with that index as its base, takes these keys instead of the index's. A file changed
// since (its ctime moves with any write, chmod or rename of it) is read as any changed file is. The keys only decide
// what is read: the chunk lists still come from the base index, whose SHA-256 the record vouches for, so a stats file
// that lies makes at worst the sandbox's own next snapshot wrong, never another's.
//
//	{"version":1,"index":"<sha256 of the index restored>","files":[["path","ino","dev","mtimeNs","ctimeNs"],…]}  (zstd)

import (
	"os"
	"strconv"

	json "github.com/goccy/go-json"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/pack"
)

// StatsFile is a restored tree's stat keys.
type StatsFile struct {
	Version int         `json:"version"`
	Index   string      `json:"index"`
	Files   [][5]string `json:"files"`
}

// WriteStats lstats each regular file of x (not a later name of a hard link) beneath root, by descriptors that never
// follow a symlink, and writes their keys to out (renamed into place once whole). Taken after every link and time
// was set: each of those moves a file's ctime.
func WriteStats(root string, x *Index, indexSha256, out string) (int, error) {
	rootFd, err := beneath.OpenRoot(root)
	if err != nil {
		return 0, err
	}
	defer unix.Close(rootFd)
	dirs := map[string]int{"": rootFd}
	defer func() {
		for p, fd := range dirs {
			if p != "" {
				unix.Close(fd)
			}
		}
	}()
	s := StatsFile{Version: 1, Index: indexSha256, Files: make([][5]string, 0, len(x.Entries))}
	for i := range x.Entries {
		e := &x.Entries[i]
		if e.Type != "file" || e.Link != "" {
			continue
		}
		dir, name := splitPath(e.Path)
		dfd, ok := dirs[dir]
		if !ok {
			if dfd, err = beneath.OpenDirBeneath(rootFd, dir); err != nil {
				continue // gone or not a directory: that file is simply read at the next backup
			}
			dirs[dir] = dfd
		}
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		s.Files = append(s.Files, [5]string{e.Path, strconv.FormatUint(st.Ino, 10), strconv.FormatUint(st.Dev, 10),
			strconv.FormatInt(st.Mtim.Nano(), 10), strconv.FormatInt(st.Ctim.Nano(), 10)})
	}
	if err := writeStatsFile(&s, out); err != nil {
		return 0, err
	}
	return len(s.Files), nil
}

// writeStatsFile writes s to out, renamed into place once whole.
func writeStatsFile(s *StatsFile, out string) error {
	tmp := out + ".tmp-" + strconv.Itoa(os.Getpid())
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	enc, _ := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest))
	err = json.NewEncoder(enc).Encode(s)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// applyStats replaces the base's stat keys with a restored tree's, when the stats file belongs to this very index.
// Anything else (missing, another index's, not a stats file) leaves the base as it is: files are then read.
func applyStats(x *Index, indexSha256, file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, nil
	}
	defer f.Close()
	dec, err := zstd.NewReader(&capped{r: f, left: DefaultLimits.MaxCompressed, what: "the stats file"}, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(DefaultLimits.MaxJSON)))
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	var s StatsFile
	if err := json.NewDecoder(&capped{r: dec, left: DefaultLimits.MaxJSON, what: "the stats file's JSON"}).Decode(&s); err != nil || s.Version != 1 || s.Index != indexSha256 {
		return 0, nil
	}
	at := make(map[string]int, len(x.Entries))
	for i := range x.Entries {
		at[x.Entries[i].Path] = i
	}
	applied := 0
	for _, k := range s.Files {
		i, ok := at[k[0]]
		if !ok || x.Entries[i].Type != "file" || x.Entries[i].Link != "" {
			continue
		}
		x.Entries[i].Stat = pack.Stat{Ino: k[1], Dev: k[2], MtimeNs: k[3], CtimeNs: k[4]}
		applied++
	}
	return applied, nil
}

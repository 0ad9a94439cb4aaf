package filesfs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// packCache keeps fetched frames where they lie in their packs: one sparse file per pack (CACHE/packs/<name>), each
// frame written at its pack offset, and beside it a log of the frames verified so far ("<offset> <sha256>" lines,
// appended once a frame's bytes decompressed to its chunk's SHA-256). A frame listed in the log is local and
// verified; anything else in the file is not trusted. Chunks stay compressed on disk (the npm workspace: 143 MB
// rather than 474 MB) and a fetch of a run of frames is one write, not one file per chunk: completing the workspace
// made 25,112 cache files before, most of its CPU. Packs are named by the backup that wrote them and never change,
// so a later snapshot's index naming the same pack finds its frames here (a fork's restore reuses its parent's).
type packCache struct {
	dir   string
	mu    sync.Mutex
	files map[string]*os.File
	logs  map[string]*os.File
}

func openPackCache(root string) (*packCache, error) {
	dir := filepath.Join(root, "packs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &packCache{dir: dir, files: map[string]*os.File{}, logs: map[string]*os.File{}}, nil
}

// file opens (once) the pack's frame file and its log.
func (p *packCache) file(pack string) (*os.File, *os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.files[pack]; ok {
		return f, p.logs[pack], nil
	}
	f, err := os.OpenFile(filepath.Join(p.dir, pack), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	log, err := os.OpenFile(filepath.Join(p.dir, pack+".verified"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	p.files[pack], p.logs[pack] = f, log
	return f, log, nil
}

// verified reads a pack's log: the frames (offset → sha256) verified by any earlier mount.
func (p *packCache) verified(pack string) map[int64]string {
	out := map[int64]string{}
	f, err := os.Open(filepath.Join(p.dir, pack+".verified"))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		off, sha, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(off, 10, 64)
		if ok && err == nil && len(sha) == 64 {
			out[n] = sha
		}
	}
	return out
}

// put writes frames (the pack's bytes from off) and then logs the verified ones among them: the log line is written
// only after the bytes, so a line never names a frame that is not there.
func (p *packCache) put(pack string, off int64, frames []byte, verified []string) error {
	f, log, err := p.file(pack)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(frames, off); err != nil {
		return err
	}
	if len(verified) == 0 {
		return nil
	}
	_, err = log.WriteString(strings.Join(verified, ""))
	return err
}

func logLine(off int64, sha string) string { return fmt.Sprintf("%d %s\n", off, sha) }

// read returns the frame at [off, off+n) of pack.
func (p *packCache) read(pack string, off, n int64, buf []byte) ([]byte, error) {
	f, _, err := p.file(pack)
	if err != nil {
		return nil, err
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

package testkit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fastcdc "github.com/jotfs/fastcdc-go"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/filecas"
	"snapflow/native/lazy/internal/pack"
)

// FilesPack builds a file-level index and its one pack from dir, as the format (filecas/format.go) describes: a walk
// in name order, each regular file's data regions cut by FastCDC (min avg/4, max 4·avg), each distinct chunk one zstd
// frame in the pack, hard links' later names carrying `link`. It stands for the backup engine's files-pack in tests
// of what reads an index: they must not depend on it.
func FilesPack(t testing.TB, dir, packName string, avg int) (*filecas.Index, []byte) {
	t.Helper()
	x, packBytes, err := filesPack(dir, packName, avg)
	if err != nil {
		t.Fatal(err)
	}
	return x, packBytes
}

func filesPack(dir, packName string, avg int) (*filecas.Index, []byte, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, nil, err
	}
	x := &filecas.Index{Version: filecas.Version, AvgChunk: avg, Packs: []filecas.Pack{}, Chunks: []filecas.Chunk{}, Entries: []filecas.Entry{}}
	var packBuf bytes.Buffer
	ids := map[string]int{}
	firstName := map[[2]uint64]string{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		e := filecas.Entry{Entry: pack.Entry{Path: filepath.ToSlash(rel), Mode: st.Mode & 0o7777, Mtime: st.Mtim.Sec, UID: st.Uid, GID: st.Gid,
			Stat: pack.Stat{Ino: strconv.FormatUint(st.Ino, 10), Dev: strconv.FormatUint(st.Dev, 10), MtimeNs: strconv.FormatInt(st.Mtim.Nano(), 10), CtimeNs: strconv.FormatInt(st.Ctim.Nano(), 10)}}}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = "dir"
		case unix.S_IFLNK:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			e.Type, e.Target, e.Size = "symlink", target, int64(len(target))
		case unix.S_IFIFO:
			e.Type, e.Node = "other", "fifo"
		case unix.S_IFCHR:
			e.Type, e.Node = "other", "char"
		case unix.S_IFBLK:
			e.Type, e.Node = "other", "block"
		case unix.S_IFREG:
			e.Type, e.Size = "file", st.Size
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := firstName[key]; ok && st.Nlink > 1 {
				e.Link = first
				break
			}
			firstName[key] = e.Path
			if err := fileChunks(path, &st, &e, x, ids, &packBuf, enc, avg); err != nil {
				return err
			}
		default:
			return nil
		}
		x.Entries = append(x.Entries, e)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(packBuf.Bytes())
	x.Packs = append(x.Packs, filecas.Pack{Name: packName, Bytes: int64(packBuf.Len()), Sha256: hex.EncodeToString(sum[:])})
	return x, packBuf.Bytes(), nil
}

// fileChunks chunks a file's data regions (its holes found by SEEK_DATA/SEEK_HOLE when it has fewer blocks than its
// size needs), adding the chunks the pack does not hold yet.
func fileChunks(path string, st *unix.Stat_t, e *filecas.Entry, x *filecas.Index, ids map[string]int, packBuf *bytes.Buffer, enc *zstd.Encoder, avg int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	regions := [][2]int64{{0, st.Size}}
	if st.Blocks*512 < st.Size {
		regions = regions[:0]
		for off := int64(0); off < st.Size; {
			data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
			if errors.Is(err, unix.ENXIO) {
				break
			}
			if err != nil {
				return err
			}
			hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
			if err != nil {
				return err
			}
			regions = append(regions, [2]int64{data, hole - data})
			off = hole
		}
		e.Data, e.Holes = regions, st.Size
		for _, r := range regions {
			e.Holes -= r[1]
		}
		if len(regions) == 0 {
			e.Data = nil // all hole (holes equal to its size): no content, and no data regions to list
		}
	}
	readers := make([]io.Reader, 0, len(regions))
	for _, r := range regions {
		readers = append(readers, io.NewSectionReader(f, r[0], r[1]))
	}
	if st.Size == 0 || len(regions) == 0 {
		return nil
	}
	c, err := fastcdc.NewChunker(io.MultiReader(readers...), fastcdc.Options{AverageSize: avg, MinSize: avg / 4, MaxSize: avg * 4, BufSize: avg * 8})
	if err != nil {
		return err
	}
	for {
		ch, err := c.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		sum := sha256.Sum256(ch.Data)
		sha := hex.EncodeToString(sum[:])
		id, ok := ids[sha]
		if !ok {
			frame := enc.EncodeAll(ch.Data, nil)
			id = len(x.Chunks)
			ids[sha] = id
			x.Chunks = append(x.Chunks, filecas.Chunk{Sha256: sha, Pack: 0, Offset: int64(packBuf.Len()), Stored: int64(len(frame)), Size: int64(ch.Length)})
			packBuf.Write(frame)
		}
		e.Chunks = append(e.Chunks, id)
	}
}

// FilesTree writes a small tree with every kind of entry an index holds: directories (one empty), files from empty to
// several chunks (text and incompressible), modes and owners of several kinds, ns mtimes, symlinks (one dangling),
// a hard-link pair, a fifo and a sparse file. seed varies the content.
func FilesTree(t testing.TB, dir string, seed int64) {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	text := func(n int) []byte {
		var b bytes.Buffer
		for b.Len() < n {
			fmt.Fprintf(&b, "module.exports.f%d = function () { return %d; };\n", r.Intn(1000), r.Intn(1e6))
		}
		return b.Bytes()[:n]
	}
	noise := func(n int) []byte { b := make([]byte, n); r.Read(b); return b }
	for _, d := range []string{"a/b/c", "a/empty", "pkg/lib", "pkg/bin"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	files := map[string][]byte{
		"a/zero":         {},
		"a/small.txt":    []byte("hello\n"),
		"a/b/mid.js":     text(50_000),
		"a/b/c/big.bin":  noise(700_000),
		"pkg/lib/one.js": text(300_000),
		"pkg/lib/two.js": text(120_000),
		"pkg/bin/tool":   text(2_000),
		"pkg/lib/dup.js": nil, // the same bytes as one.js: its chunks are shared
	}
	files["pkg/lib/dup.js"] = files["pkg/lib/one.js"]
	for name, data := range files {
		must(os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	must(os.Chmod(filepath.Join(dir, "pkg/bin/tool"), 0o755))
	must(os.Chmod(filepath.Join(dir, "a/small.txt"), 0o600))
	must(os.Chmod(filepath.Join(dir, "a/empty"), 0o700))
	must(os.Symlink("../a/b/mid.js", filepath.Join(dir, "pkg/link.js")))
	must(os.Symlink("nowhere", filepath.Join(dir, "a/dangling")))
	must(os.Link(filepath.Join(dir, "a/b/mid.js"), filepath.Join(dir, "pkg/hard.js")))
	must(unix.Mkfifo(filepath.Join(dir, "a/pipe"), 0o640))
	sparse, err := os.Create(filepath.Join(dir, "a/sparse.img"))
	must(err)
	_, err = sparse.WriteAt(text(10_000), 1<<20)
	must(err)
	_, err = sparse.WriteAt(text(5_000), 3<<20)
	must(err)
	must(sparse.Truncate(4 << 20))
	must(sparse.Close())
	if os.Geteuid() == 0 {
		must(os.Lchown(filepath.Join(dir, "pkg/lib/two.js"), 1234, 5678))
		must(os.Lchown(filepath.Join(dir, "a/dangling"), 1234, 5678))
	}
	// ns mtimes, set last (children first: a directory's mtime moves when its entries change)
	var names []string
	must(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error { names = append(names, p); return err }))
	for i := len(names) - 1; i >= 0; i-- {
		ts := time.Unix(1_700_000_000+int64(i)*3607, int64(r.Intn(1e9)))
		must(unix.UtimesNanoAt(unix.AT_FDCWD, names[i], []unix.Timespec{unix.NsecToTimespec(ts.UnixNano()), unix.NsecToTimespec(ts.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// PackStore serves packs over real HTTP, honouring Range (http.ServeContent), as the store's presigned GETs do. A byte
// range of a pack can be corrupted, and every request is counted.
type PackStore struct {
	*httptest.Server
	mu      sync.Mutex
	packs   map[string][]byte
	corrupt map[string][2]int64
	ranges  []string
	delay   time.Duration
}

// NewPackStore serves packs (name → bytes) at /packs/<name>.
func NewPackStore(packs map[string][]byte) *PackStore {
	s := &PackStore{packs: packs, corrupt: map[string][2]int64{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *PackStore) serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/packs/")
	s.mu.Lock()
	data, ok := s.packs[name]
	s.ranges = append(s.ranges, name+" "+r.Header.Get("Range"))
	bad, corrupt := s.corrupt[name]
	delay := s.delay
	s.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	if corrupt {
		data = append([]byte{}, data...)
		for i := bad[0]; i < bad[1]; i++ {
			data[i] ^= 0x5a
		}
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

// Corrupt flips the bytes [from, to) of pack name in every answer from now on; Heal undoes it.
func (s *PackStore) Corrupt(name string, from, to int64) {
	s.mu.Lock()
	s.corrupt[name] = [2]int64{from, to}
	s.mu.Unlock()
}
func (s *PackStore) Heal(name string) { s.mu.Lock(); delete(s.corrupt, name); s.mu.Unlock() }

// Delay makes every answer wait d first (so concurrent readers overlap one fetch).
func (s *PackStore) Delay(d time.Duration) { s.mu.Lock(); s.delay = d; s.mu.Unlock() }

// Requests lists the requests so far as "<pack> <Range header>".
func (s *PackStore) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.ranges...)
}

// WriteURLs writes a URL file {"<pack>": "<url>"} for the packs.
func (s *PackStore) WriteURLs(path string) error {
	urls := map[string]string{}
	s.mu.Lock()
	for name := range s.packs {
		urls[name] = s.URL + "/packs/" + name
	}
	s.mu.Unlock()
	return writeJSONFile(path, urls)
}

func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteIndex writes x as the zstd-compressed index file a mount reads.
func WriteIndex(t testing.TB, path string, x *filecas.Index) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := filecas.Encode(f, x); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

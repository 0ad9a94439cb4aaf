package filecas

// A small stand-in for the backup (files-pack is written elsewhere): walks a tree, cuts each file's data into
// fixed-size chunks, compresses each distinct one into a zstd frame of a pack, and serves the packs over HTTP with
// Range, counting requests. Tests only.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/pack"
)

type built struct {
	x     *Index
	packs map[string][]byte
}

// build indexes dir: chunks of chunkSize bytes, spread over nPacks packs (chunk k of the whole tree in pack k % n:
// a file's chunks then come from several requests, out of order).
func build(t *testing.T, dir string, chunkSize, nPacks int) *built {
	return buildWith(t, dir, chunkSize, nPacks, false)
}

// buildWith: denseHoles indexes a sparse file as its whole content (zeros included) with its holes counted and no
// data regions, as a backup that does not map them may.
func buildWith(t *testing.T, dir string, chunkSize, nPacks int, denseHoles bool) *built {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &built{x: &Index{Version: Version, AvgChunk: chunkSize}, packs: map[string][]byte{}}
	bufs := make([]*bytes.Buffer, nPacks)
	for i := range bufs {
		bufs[i] = &bytes.Buffer{}
		b.x.Packs = append(b.x.Packs, Pack{Name: fmt.Sprintf("pack-%d", i)})
	}
	byName := map[string]int{}
	firstOf := map[[2]uint64]string{}
	addChunk := func(data []byte) int {
		s := sha256.Sum256(data)
		name := hex.EncodeToString(s[:])
		if c, ok := byName[name]; ok {
			return c
		}
		p := len(b.x.Chunks) % nPacks
		frame := enc.EncodeAll(data, nil)
		b.x.Chunks = append(b.x.Chunks, Chunk{Sha256: name, Pack: p, Offset: int64(bufs[p].Len()), Stored: int64(len(frame)), Size: int64(len(data))})
		bufs[p].Write(frame)
		byName[name] = len(b.x.Chunks) - 1
		return len(b.x.Chunks) - 1
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		e := Entry{Entry: pack.Entry{Path: rel, Mode: st.Mode & 0o7777, Mtime: st.Mtim.Sec, UID: st.Uid, GID: st.Gid,
			Stat: pack.Stat{Ino: strconv.FormatUint(st.Ino, 10), Dev: strconv.FormatUint(st.Dev, 10), MtimeNs: strconv.FormatInt(st.Mtim.Nano(), 10), CtimeNs: strconv.FormatInt(st.Ctim.Nano(), 10)}}}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = "dir"
		case unix.S_IFLNK:
			e.Type = "symlink"
			e.Target, _ = os.Readlink(path)
			e.Size = int64(len(e.Target))
		case unix.S_IFIFO:
			e.Type, e.Node = "other", "fifo"
		case unix.S_IFREG:
			e.Type, e.Size = "file", st.Size
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := firstOf[key]; ok && st.Nlink > 1 {
				e.Link = first
				break
			}
			firstOf[key] = rel
			content, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(content)
			e.Sha256 = hex.EncodeToString(sum[:])
			data := content
			if st.Blocks*512 < st.Size {
				regions, inData := dataOf(t, path, content)
				var n int64
				for _, r := range regions {
					n += r[1]
				}
				e.Holes = st.Size - n
				if !denseHoles || n == 0 {
					e.Data, data = regions, inData
				}
			}
			for off := 0; off < len(data); off += chunkSize {
				e.Chunks = append(e.Chunks, addChunk(data[off:min(off+chunkSize, len(data))]))
			}
		default:
			return fmt.Errorf("%s: a type the builder does not index", rel)
		}
		b.x.Entries = append(b.x.Entries, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, buf := range bufs {
		s := sha256.Sum256(buf.Bytes())
		b.x.Packs[i].Bytes, b.x.Packs[i].Sha256 = int64(buf.Len()), hex.EncodeToString(s[:])
		b.packs[b.x.Packs[i].Name] = buf.Bytes()
	}
	if err := b.x.Validate(DefaultLimits); err != nil {
		t.Fatalf("the builder made an index Validate refuses: %v", err)
	}
	return b
}

// dataOf is a sparse file's data regions (SEEK_DATA/SEEK_HOLE) and their bytes concatenated.
func dataOf(t *testing.T, path string, content []byte) ([][2]int64, []byte) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var regions [][2]int64
	var data []byte
	for off := int64(0); off < int64(len(content)); {
		start, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		end, err := unix.Seek(int(f.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		regions = append(regions, [2]int64{start, end - start})
		data = append(data, content[start:end]...)
		off = end
	}
	return regions, data
}

// store serves the packs at /<name> with Range, counting requests; stall, when set, is asked before each answer
// whether to send half the range and then go silent for the given time.
type store struct {
	srv      *httptest.Server
	requests atomic.Int64
	stall    func(n int64) time.Duration
}

func serve(t *testing.T, packs map[string][]byte) *store {
	s := &store{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := s.requests.Add(1)
		body, ok := packs[req.URL.Path[1:]]
		if !ok {
			http.NotFound(w, req)
			return
		}
		if s.stall != nil {
			if d := s.stall(n); d > 0 {
				var from, to int64
				fmt.Sscanf(req.Header.Get("Range"), "bytes=%d-%d", &from, &to)
				half := from + (to+1-from)/2
				w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(body)))
				w.Header().Set("Content-Length", strconv.FormatInt(to+1-from, 10))
				w.WriteHeader(http.StatusPartialContent)
				w.Write(body[from:half])
				w.(http.Flusher).Flush()
				select {
				case <-time.After(d):
				case <-req.Context().Done():
				}
				return
			}
		}
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *store) urls(b *built) map[string]string {
	out := map[string]string{}
	for name := range b.packs {
		out[name] = s.srv.URL + "/" + name
	}
	return out
}

// roundTrip encodes and decodes the index, as the command reads it.
func roundTrip(t *testing.T, x *Index) *Index {
	var buf bytes.Buffer
	if err := Encode(&buf, x); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(&buf, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

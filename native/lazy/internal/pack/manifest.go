package pack

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Entry is one manifest entry (protocol.ts ManifestEntry), its fields in the order the agent's single pass writes
// them: what the tar header says, then the content's hash, then the walk's lstat key.
type Entry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtime"`
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
	Target string `json:"target,omitempty"`
	Link   string `json:"link,omitempty"`
	Holes  int64  `json:"holes,omitempty"`
	Sha256 string `json:"sha256,omitempty"`
	Stat   Stat   `json:"stat"`
}

// Stat is the walk's lstat key: what an incremental compares to find what changed (decimal strings: 64-bit values).
type Stat struct {
	Ino     string `json:"ino"`
	Dev     string `json:"dev"`
	MtimeNs string `json:"mtimeNs"`
	CtimeNs string `json:"ctimeNs"`
}

// Totals are the manifest's totals (manifest.ts totalsOf): a hard link counts as a file, its bytes once.
type Totals struct {
	Files    int   `json:"files"`
	Dirs     int   `json:"dirs"`
	Symlinks int   `json:"symlinks"`
	Bytes    int64 `json:"bytes"`
}

func (t *Totals) add(e *Entry) {
	switch e.Type {
	case "file":
		t.Files++
		if e.Link == "" {
			t.Bytes += e.Size
		}
	case "dir":
		t.Dirs++
	case "symlink":
		t.Symlinks++
	}
}

// manifestWriter streams the manifest JSON to a file beside its final name as entries are made (a 30k-entry
// manifest is ~10 MB: never held whole), and renames it into place only when the archive succeeded.
type manifestWriter struct {
	final, tmp string
	f          *os.File
	w          *bufio.Writer
	enc        *json.Encoder
	buf        bytes.Buffer
	n          int
	bytes      int64
	totals     Totals
	// self: the manifest file being written, which a walk of a tree holding it must not archive (the agent's pass
	// writes its manifest after the walk, so its manifest is never in its archive either).
	self unix.Stat_t
}

func (m *manifestWriter) is(st *unix.Stat_t) bool {
	return st.Dev == m.self.Dev && st.Ino == m.self.Ino
}

func newManifestWriter(final string) (*manifestWriter, error) {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return nil, err
	}
	os.Remove(final) // an earlier attempt's manifest must not speak for this one
	tmp := TempManifest(final)
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	m := &manifestWriter{final: final, tmp: tmp, f: f, w: bufio.NewWriterSize(f, 1<<20)}
	if err := unix.Fstat(int(f.Fd()), &m.self); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	m.enc = json.NewEncoder(&m.buf)
	m.enc.SetEscapeHTML(false) // as JSON.stringify writes '<', '>' and '&'
	m.write([]byte(`{"version":1,"entries":[`))
	return m, nil
}

func (m *manifestWriter) write(p []byte) {
	n, _ := m.w.Write(p) // a write error stays in the bufio.Writer; Flush reports it
	m.bytes += int64(n)
}

func (m *manifestWriter) add(e *Entry) error {
	m.buf.Reset()
	if err := m.enc.Encode(e); err != nil {
		return err
	}
	if m.n > 0 {
		m.write([]byte{','})
	}
	m.write(bytes.TrimSuffix(m.buf.Bytes(), []byte{'\n'}))
	m.n++
	m.totals.add(e)
	return nil
}

// TempManifest is where the manifest is written until the pass succeeds: beside final, named by the process.
func TempManifest(final string) string { return final + ".tmp-" + strconv.Itoa(os.Getpid()) }

// finish writes totals and the selection record, and renames the file into place.
func (m *manifestWriter) finish(record *Record) error {
	tail := struct {
		Totals    Totals  `json:"totals"`
		Selection *Record `json:"selection,omitempty"`
	}{m.totals, record}
	m.buf.Reset()
	if err := m.enc.Encode(tail); err != nil {
		return err
	}
	m.write([]byte("],"))
	m.write(bytes.TrimSuffix(bytes.TrimPrefix(m.buf.Bytes(), []byte{'{'}), []byte{'\n'}))
	if err := m.w.Flush(); err != nil {
		return err
	}
	if err := m.f.Close(); err != nil {
		return err
	}
	return os.Rename(m.tmp, m.final)
}

// abandon removes the half-written manifest.
func (m *manifestWriter) abandon() {
	m.f.Close()
	os.Remove(m.tmp)
}

// manifestSeconds is the whole seconds the agent's tar parser (node-tar) reads from the mtime this archive carries,
// so that a manifest made here compares equal with the restore's in-stream check: node-tar reads a pax mtime as
// new Date(Number(value) * 1000), whose double arithmetic can round a time just short of a second up to it.
func manifestSeconds(ts time.Time) int64 {
	if ts.Nanosecond() == 0 {
		return ts.Unix()
	}
	v, _ := strconv.ParseFloat(paxTime(ts), 64)
	ms := math.Trunc(v * 1000) // a JavaScript Date keeps whole milliseconds, truncated
	return int64(math.Floor(ms / 1000))
}

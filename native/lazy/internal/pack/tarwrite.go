package pack

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

const blockSize = 512

// tarWriter writes the archive's entries as GNU tar --format=posix does for snapflow (tar-argv.ts TAR_CREATE_FORMAT):
// pax headers where ustar's fields fall short (long or non-ASCII names, nanosecond mtimes), no atime or ctime, numeric
// owners, and sparse files in GNU's PAX 1.0 form. archive/tar writes every entry but the sparse ones, which it
// cannot (golang.org/issue/22735: it drops GNU.sparse.* records): those are written here, between its entries.
type tarWriter struct {
	raw   *countingWriter
	tw    *tar.Writer
	block [blockSize]byte
}

func newTarWriter(w io.Writer) *tarWriter {
	raw := &countingWriter{w: w}
	return &tarWriter{raw: raw, tw: tar.NewWriter(raw)}
}

// header writes one entry's header (archive/tar); a regular file's content follows through Write.
func (t *tarWriter) header(h *tar.Header) error {
	h.Format = tar.FormatPAX
	return t.tw.WriteHeader(h)
}

func (t *tarWriter) Write(p []byte) (int, error) { return t.tw.Write(p) }

// sparseHeader writes a sparse file's pax header and ustar header; its body (the map, then each region's bytes,
// bodySize in all) follows through rawWrite, then padTo.
func (t *tarWriter) sparseHeader(name string, mode int64, uid, gid int, mtime time.Time, realSize, bodySize int64) error {
	if err := t.tw.Flush(); err != nil { // pads the entry before: what follows is written around archive/tar
		return err
	}
	records := [][2]string{
		{"GNU.sparse.major", "1"},
		{"GNU.sparse.minor", "0"},
		{"GNU.sparse.name", name},
		{"GNU.sparse.realsize", strconv.FormatInt(realSize, 10)},
	}
	if mtime.Nanosecond() != 0 || mtime.Unix() < 0 {
		records = append(records, [2]string{"mtime", paxTime(mtime)})
	}
	const maxOctal7, maxOctal11 = 1<<21 - 1, 1<<33 - 1
	if uid > maxOctal7 {
		records = append(records, [2]string{"uid", strconv.Itoa(uid)})
	}
	if gid > maxOctal7 {
		records = append(records, [2]string{"gid", strconv.Itoa(gid)})
	}
	if bodySize > maxOctal11 {
		records = append(records, [2]string{"size", strconv.FormatInt(bodySize, 10)})
	}
	var pax []byte
	for _, r := range records {
		pax = append(pax, paxRecord(r[0], r[1])...)
	}
	if err := t.ustar("./PaxHeaders/"+placeholderBase(name), 'x', 0o644, 0, 0, 0, int64(len(pax))); err != nil {
		return err
	}
	if err := t.rawWrite(pax); err != nil {
		return err
	}
	if err := t.padTo(int64(len(pax))); err != nil {
		return err
	}
	sec := max(mtime.Unix(), 0)
	return t.ustar(path.Join("./GNUSparseFile.0", placeholderBase(name)), '0', mode, clampID(uid), clampID(gid), sec, min(bodySize, maxOctal11))
}

// placeholderBase is the name a sparse entry's ustar header carries: readers of PAX 1.0 take GNU.sparse.name instead.
func placeholderBase(name string) string {
	base := path.Base(name)
	if len(base) > 80 || strings.ContainsFunc(base, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "file"
	}
	return base
}

func clampID(id int) int {
	if id > 1<<21-1 {
		return 0
	}
	return id
}

func (t *tarWriter) rawWrite(p []byte) error {
	_, err := t.raw.Write(p)
	return err
}

// padTo writes the zeros that round an entry's n bytes up to whole blocks.
func (t *tarWriter) padTo(n int64) error {
	if rem := n % blockSize; rem != 0 {
		clear(t.block[:])
		return t.rawWrite(t.block[:blockSize-rem])
	}
	return nil
}

// ustar writes one POSIX ustar header block.
func (t *tarWriter) ustar(name string, typeflag byte, mode int64, uid, gid int, mtime, size int64) error {
	b := &t.block
	clear(b[:])
	copy(b[0:100], name)
	octal(b[100:108], mode)
	octal(b[108:116], int64(uid))
	octal(b[116:124], int64(gid))
	octal(b[124:136], size)
	octal(b[136:148], mtime)
	b[156] = typeflag
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return t.rawWrite(b[:])
}

// octal fills a numeric field: zero-padded octal digits and a NUL.
func octal(field []byte, n int64) {
	s := strconv.FormatInt(n, 8)
	digits := len(field) - 1
	copy(field, strings.Repeat("0", digits-len(s))+s)
	field[digits] = 0
}

// paxRecord is "<length> key=value\n", the length counting itself.
func paxRecord(key, value string) string {
	body := " " + key + "=" + value + "\n"
	n := len(body) + 1
	for len(strconv.Itoa(n))+len(body) > n {
		n++
	}
	return strconv.Itoa(n) + body
}

// paxTime formats a time as archive/tar's pax mtime record does (seconds, a '.', nanoseconds without trailing zeros).
func paxTime(ts time.Time) string {
	secs, nsecs := ts.Unix(), int64(ts.Nanosecond())
	if nsecs == 0 {
		return strconv.FormatInt(secs, 10)
	}
	sign := ""
	if secs < 0 {
		sign = "-"
		secs = -(secs + 1)
		nsecs = -(nsecs - 1e9)
	}
	return strings.TrimRight(fmt.Sprintf("%s%d.%09d", sign, secs, nsecs), "0")
}

func (t *tarWriter) close() error { return t.tw.Close() }

// countingWriter counts the bytes that pass (the tar stream's size).
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Package filecas is snapflow's file-level content-addressed format (issue 24): a snapshot is a compressed index of
// the tree's entries, each regular file's content named as a list of content-defined chunks (FastCDC, SHA-256), and
// the chunks themselves live zstd-compressed, one frame each, in packs: one pack object per backup, holding only the
// chunks no earlier snapshot of its lineage had. An incremental reuses an unchanged file's chunk list without opening
// the file (restic's rule: size, ns mtime, ctime, inode, device), so it reads and stores only what changed.
//
//	index (the snapshot's object): zstd-compressed MessagePack, each struct a tuple (index_types.go, version 3):
//	[version, avgChunk,
//	 packs:   [[name (the snapshot id that wrote it), bytes, sha256], …],
//	 chunks:  [[sha256, pack P, offset, stored, size], …],
//	 entries: [[[the manifest entry: path, type, mode, size, mtime, uid, gid, target, link, holes, sha256,
//	             [ino, dev, mtimeNs, ctimeNs]],
//	            chunks [i, …], data [[offset, length], …], node ""|"fifo"|"char"|"block"], …]]
//
// Version 3 (2026-11-27) leaves out a file's SHA-256 where it is its only chunk's (a file of one chunk, no holes:
// 27.7k of the npm workspace's 31.7k entries): the decoder puts it back, so what every reader sees is unchanged. The
// npm workspace's index went from 3.82 to 2.79 MB; a hash is 64 hex digits that zstd cannot shrink below ~32 bytes.
// A sandbox's index gains nothing by it: a chunk is checked against its own SHA-256 before a byte of it is used, so
// a file of one chunk has that chunk's hash whatever the index says. Version 2, still read, writes every hash.
//
// Version 1, still read (snapshots written before 2026-11-27), is the same index as zstd-compressed JSON objects
// whose keys are the fields' JSON names. MessagePack was chosen for the wake's sake: a lazy mount decodes the whole
// index before it answers; for the npm workspace's 31.7k entries, decompress + decode took 12 + 22 ms against 40 +
// 57 ms for the JSON (goccy/go-json).
//
// A chunk is the zstd frame at [offset, offset+stored) of pack P, which decompresses to `size` bytes whose SHA-256 is
// `sha256`. A file's chunks, in order, are its content: its data regions concatenated (a sparse file lists its data
// regions in `data`; the rest is holes; without `data` the file is one region [0, size), or none when `holes` is its
// size: a file that is all hole). A hard link's later names carry `link` (the first name) and no chunks. The pack's
// store key is built by the Worker from the tenant and the pack's name, never taken from the index as a key.
//
// The index comes from a sandbox: Decode bounds what it reads and Validate refuses any index whose references,
// names or sizes do not hold together, before anything acts on it.
package filecas

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	json "github.com/goccy/go-json"
	"github.com/klauspost/compress/zstd"

	"snapflow/native/lazy/internal/pack"
)

// Version is the whole index this package writes (MessagePack, one-chunk files' hashes left out); Decode reads it,
// version 2 (MessagePack, every hash) and version 1 (JSON).
const Version = 3

// LayerVersion: a layer over a parent index (layer.go), version 3's tuple followed by its Layer tuple.
const LayerVersion = 4

// everyHashVersion: MessagePack with every file's SHA-256 written.
const everyHashVersion = 2

// jsonVersion: the first format, zstd-compressed JSON.
const jsonVersion = 1

// Limits bound what a sandbox's index can make a reader do.
type Limits struct {
	// MaxCompressed and MaxJSON: the index object's bytes, and the index once decompressed (version 1's JSON).
	MaxCompressed int64
	MaxJSON       int64
	// MaxChunk: the largest chunk's size (FastCDC's max is 4 × avg), so a decoder's buffer is bounded.
	MaxChunk int64
}

// DefaultLimits: the npm workspace's index is ~3.8 MB compressed, 8.3 MB of MessagePack (13.6 MB as version 1's
// JSON) for 31.7k entries; the manifest bound (MAX_MANIFEST_BYTES, 128 MiB) holds for the decompressed index too.
var DefaultLimits = Limits{MaxCompressed: 64 << 20, MaxJSON: 128 << 20, MaxChunk: 8 << 20}

// indexLevel: an incremental writes the whole index after its last chunk, on the pass's critical path;
// klauspost's fastest level costs less time than its default for a few percent more bytes.
const indexLevel = zstd.SpeedFastest

// Encode writes the index as zstd-compressed MessagePack (x.Version is written as it is: Version for a new index),
// and a layer's tuple after it when x is a layer.
func Encode(w io.Writer, x *Index) error {
	if x.Version == Version {
		// Marshalled from a copy whose one-chunk files' hashes are left out: x itself stays as it is.
		y := *x
		y.Entries = make([]Entry, len(x.Entries))
		for i := range x.Entries {
			y.Entries[i] = x.Entries[i]
			if y.elidable(&y.Entries[i]) {
				y.Entries[i].Sha256 = ""
			}
		}
		x = &y
	}
	b, err := x.MarshalMsg(nil)
	if err == nil && x.Layer != nil {
		b, err = x.Layer.MarshalMsg(b)
	}
	if err != nil {
		return err
	}
	return writeFrame(w, b)
}

// writeFrame writes b as one zstd frame at the index's level.
func writeFrame(w io.Writer, b []byte) error {
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(indexLevel))
	if err != nil {
		return err
	}
	if _, err := enc.Write(b); err != nil {
		enc.Close()
		return err
	}
	return enc.Close()
}

// Decode reads a zstd-compressed whole index (MessagePack, or version 1's JSON) within the limits and validates it.
// A layer is refused: it means something only over its parent (DecodeChain).
func Decode(r io.Reader, l Limits) (*Index, error) {
	x, err := decodeObject(r, l)
	if err != nil {
		return nil, err
	}
	if x.Layer != nil {
		return nil, refused("version", "a layer over index "+x.Layer.Parent+": it is read with its chain")
	}
	return x, x.finish(l)
}

// finish validates a whole index (as decoded, or composed from its chain) and puts back the hashes version 3 leaves out.
func (x *Index) finish(l Limits) error {
	if err := x.Validate(l); err != nil {
		return err
	}
	if x.Version == Version {
		// Validate has checked every chunk reference: the hashes left out are their chunks'.
		for i := range x.Entries {
			if e := &x.Entries[i]; e.Sha256 == "" && oneChunkFile(e) {
				e.Sha256 = x.Chunks[e.Chunks[0]].Sha256
			}
		}
	}
	return nil
}

// decodeObject reads one index object within the limits: a whole index, or a layer (Layer set, its references
// unchecked until it is composed over its parent).
func decodeObject(r io.Reader, l Limits) (*Index, error) {
	// Read whole (within its bound), then decompressed and decoded in one call each, into a buffer sized once: a lazy
	// mount waits for this before it can answer (a growing buffer took ~15% of it).
	comp, err := io.ReadAll(&capped{r: r, left: l.MaxCompressed, what: "the index object"})
	if err != nil {
		return nil, err
	}
	return decodeBytes(comp, l)
}

// decodeBytes is decodeObject of an object already in memory (a chain's, read whole by its caller): not copied again.
func decodeBytes(comp []byte, l Limits) (*Index, error) {
	if int64(len(comp)) > l.MaxCompressed {
		return nil, refused("", fmt.Sprintf("the index object is larger than its bound (%d bytes)", l.MaxCompressed))
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(l.MaxJSON)))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	raw, err := dec.DecodeAll(comp, make([]byte, 0, min(4*int64(len(comp)), l.MaxJSON)))
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, refused("", "the decompressed index is larger than its bound")
	} else if err != nil {
		return nil, refused("", fmt.Sprintf("the index does not decompress: %v", err))
	}
	var x Index
	msgpack := true
	if len(raw) > 0 && raw[0] == '{' { // a MessagePack index starts with its tuple's array header (0x95)
		msgpack = false
		if err := json.Unmarshal(raw, &x); err != nil {
			return nil, refused("", fmt.Sprintf("the index does not decode: %v", err))
		}
	} else if rest, err := x.UnmarshalMsg(raw); err != nil {
		return nil, refused("", fmt.Sprintf("the index does not decode: %v", err))
	} else if x.Version == LayerVersion {
		var layer Layer
		if rest, err = layer.UnmarshalMsg(rest); err != nil {
			return nil, refused("layer", fmt.Sprintf("the layer does not decode: %v", err))
		}
		x.Layer = &layer
		if len(rest) > 0 {
			return nil, refused("", fmt.Sprintf("%d bytes follow the layer", len(rest)))
		}
	} else if len(rest) > 0 {
		return nil, refused("", fmt.Sprintf("%d bytes follow the index", len(rest)))
	}
	if msgpack && x.Version != Version && x.Version != everyHashVersion && x.Version != LayerVersion {
		return nil, refused("version", fmt.Sprintf("version %d is not %d, %d or %d (MessagePack)", x.Version, Version, everyHashVersion, LayerVersion))
	} else if !msgpack && x.Version != jsonVersion {
		return nil, refused("version", fmt.Sprintf("version %d is not %d (JSON)", x.Version, jsonVersion))
	}
	return &x, nil
}

// oneChunkFile: e is a file's first name whose content is one chunk and no holes: its SHA-256 is its chunk's.
func oneChunkFile(e *Entry) bool {
	return e.Type == "file" && e.Link == "" && len(e.Chunks) == 1 && len(e.Data) == 0 && e.Holes == 0
}

// elidable: e is a file of one chunk whose SHA-256 is that chunk's (version 3 leaves it out).
func (x *Index) elidable(e *Entry) bool {
	return oneChunkFile(e) && e.Chunks[0] >= 0 && e.Chunks[0] < len(x.Chunks) && e.Sha256 == x.Chunks[e.Chunks[0]].Sha256
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// isSha256Hex is sha256Hex.MatchString without the regexp machinery: Validate asks it of every chunk (25k for the npm
// workspace, where the regexp took ~30 ms of an incremental's base read, and a compare per character still 7 ms).
func isSha256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	bad := byte(0)
	for i := 0; i < len(s); i++ {
		bad |= notLowerHex[s[i]]
	}
	return bad == 0
}

// notLowerHex[c] is 1 unless c is one of 0-9 a-f.
var notLowerHex = func() (t [256]byte) {
	for c := range t {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			t[c] = 1
		}
	}
	return t
}()

// packName: the id of the snapshot whose backup wrote the pack (ids.ts: letters, digits, '-' and '_').
var packName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Validate checks that every reference lies inside the index, every name is a relative path beneath the root, and a
// file's chunks add up to its data: what a restore or a mount would otherwise trust.
func (x *Index) Validate(l Limits) error {
	if x.Version != Version && x.Version != everyHashVersion && x.Version != jsonVersion {
		return refused("version", fmt.Sprintf("version %d is not %d", x.Version, Version))
	}
	for i, p := range x.Packs {
		if !packName.MatchString(p.Name) || !isSha256Hex(p.Sha256) || p.Bytes < 0 {
			return refused("packs", fmt.Sprintf("pack %d (%q) has a bad name, SHA-256 or size", i, p.Name))
		}
	}
	for i, c := range x.Chunks {
		if !isSha256Hex(c.Sha256) || c.Pack < 0 || c.Pack >= len(x.Packs) || c.Offset < 0 || c.Stored <= 0 ||
			c.Size <= 0 || c.Size > l.MaxChunk || c.Offset+c.Stored > x.Packs[c.Pack].Bytes {
			return refused("chunks", fmt.Sprintf("chunk %d (%s) lies outside its pack or has a bad size", i, c.Sha256))
		}
	}
	seen := make(map[string]struct{}, len(x.Entries))
	for i := range x.Entries {
		e := &x.Entries[i]
		if err := checkName(e.Path); err != nil {
			return err
		}
		if _, dup := seen[e.Path]; dup {
			return refused("entries", fmt.Sprintf("%q is listed twice", e.Path))
		}
		seen[e.Path] = struct{}{}
		switch e.Type {
		case "file", "dir", "symlink":
		case "other":
			if e.Node != "fifo" && e.Node != "char" && e.Node != "block" {
				return refused("entries", fmt.Sprintf("%q is an other entry of node %q", e.Path, e.Node))
			}
		default:
			return refused("entries", fmt.Sprintf("%q has type %q", e.Path, e.Type))
		}
		if e.Link != "" {
			if err := checkName(e.Link); err != nil {
				return err
			}
			if e.Type != "file" || len(e.Chunks) > 0 || len(e.Data) > 0 {
				return refused("entries", fmt.Sprintf("%q is a hard link with content of its own", e.Path))
			}
			continue
		}
		if e.Type != "file" && (len(e.Chunks) > 0 || len(e.Data) > 0) {
			return refused("entries", fmt.Sprintf("%q is a %s with content", e.Path, e.Type))
		}
		if e.Size < 0 {
			return refused("entries", fmt.Sprintf("%q has a negative size", e.Path))
		}
		data := e.Size
		if len(e.Data) == 0 && e.Holes == e.Size {
			data = 0 // all hole
		}
		if len(e.Data) > 0 {
			data = 0
			end := int64(0)
			for _, r := range e.Data {
				if r[0] < end || r[1] <= 0 || r[0]+r[1] > e.Size {
					return refused("entries", fmt.Sprintf("%q has data regions out of order or beyond its size", e.Path))
				}
				end = r[0] + r[1]
				data += r[1]
			}
		}
		var sum int64
		for _, c := range e.Chunks {
			if c < 0 || c >= len(x.Chunks) {
				return refused("entries", fmt.Sprintf("%q names chunk %d of %d", e.Path, c, len(x.Chunks)))
			}
			sum += x.Chunks[c].Size
		}
		if e.Type == "file" && sum != data {
			return refused("entries", fmt.Sprintf("%q: its chunks hold %d bytes, its data is %d", e.Path, sum, data))
		}
	}
	return nil
}

// checkName refuses what could lead outside the tree: an absolute name, '..', '.' or empty components, a NUL.
func checkName(p string) error {
	if p == "" {
		return nil // the root itself
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
		return &pack.Error{Code: "path_outside_root", Field: "index", Message: fmt.Sprintf("the index's name %q is refused: it could lead outside the restored tree", p)}
	}
	for rest := p; ; {
		part, after, more := strings.Cut(rest, "/")
		if part == "" || part == "." || part == ".." {
			return &pack.Error{Code: "path_outside_root", Field: "index", Message: fmt.Sprintf("the index's name %q is refused: it could lead outside the restored tree", p)}
		}
		if !more {
			break
		}
		rest = after
	}
	return nil
}

func refused(field, why string) error {
	f := "index"
	if field != "" {
		f = "index." + field
	}
	return &pack.Error{Code: "bad_request", Field: f, Message: "the file-level index is refused: " + why}
}

// capped fails a read past its bound instead of reading on: a sandbox's object is never read whole on trust.
type capped struct {
	r    io.Reader
	left int64
	what string
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n > 0 {
			return 0, refused("", c.what+" is larger than its bound")
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

package filecas

import (
	"bytes"
	"strings"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/klauspost/compress/zstd"
	"github.com/tinylib/msgp/msgp"

	"snapflow/native/lazy/internal/pack"
)

// sample is a small valid index: a file of two chunks, a sparse file, a hard link, a directory, a fifo.
func sample() *Index {
	st := pack.Stat{Ino: "12", Dev: "2049", MtimeNs: "1700000000123456789", CtimeNs: "1700000000123456789"}
	h := func(c byte) string { return strings.Repeat(string(c), 64) }
	return &Index{Version: Version, AvgChunk: 1024,
		Packs:  []Pack{{Name: "bk-1", Bytes: 300, Sha256: h('a')}},
		Chunks: []Chunk{{Sha256: h('b'), Pack: 0, Offset: 0, Stored: 100, Size: 600}, {Sha256: h('c'), Pack: 0, Offset: 100, Stored: 200, Size: 400}},
		Entries: []Entry{
			{Entry: pack.Entry{Path: "", Type: "dir", Mode: 0o755, Stat: st}},
			{Entry: pack.Entry{Path: "a", Type: "file", Mode: 0o644, Size: 1000, Mtime: 1700000000, Sha256: h('d'), Stat: st}, Chunks: []int{0, 1}},
			{Entry: pack.Entry{Path: "s", Type: "file", Mode: 0o600, Size: 5000, Holes: 4400, Sha256: h('e'), Stat: st}, Chunks: []int{0}, Data: [][2]int64{{4096, 600}}},
			{Entry: pack.Entry{Path: "l", Type: "file", Mode: 0o644, Size: 1000, Link: "a", Stat: st}},
			{Entry: pack.Entry{Path: "p", Type: "other", Mode: 0o644, Stat: st}, Node: "fifo"},
			{Entry: pack.Entry{Path: "q", Type: "file", Mode: 0o644, Size: 400, Sha256: h('c'), Stat: st}, Chunks: []int{1}},
		}}
}

func zst(t *testing.T, b []byte) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil)
	must(t, err)
	return e.EncodeAll(b, nil)
}

func TestAnIndexDecodesToWhatWasEncoded(t *testing.T) {
	var b bytes.Buffer
	must(t, Encode(&b, sample()))
	if raw := unzstd(t, b.Bytes()); raw[0] != 0x95 {
		t.Fatalf("an index is a MessagePack tuple of 5, not %#x…", raw[0])
	}
	x, err := Decode(&b, DefaultLimits)
	must(t, err)
	if got, want := mustJSON(t, x), mustJSON(t, sample()); got != want {
		t.Fatalf("decoded %s\nwant    %s", got, want)
	}
}

// Version 3 leaves a one-chunk file's hash out ("q": its chunk's, written once, in the chunk table) and the decoder puts
// it back; "s", one chunk with holes, keeps its own. Version 2, every hash written, still decodes to the same.
func TestAOneChunkFilesHashIsItsChunksWrittenOnce(t *testing.T) {
	h := strings.Repeat("c", 64)
	var b bytes.Buffer
	must(t, Encode(&b, sample()))
	if n := bytes.Count(unzstd(t, b.Bytes()), []byte(h)); n != 1 {
		t.Fatalf("the hash of q's only chunk is written %d times, not once", n)
	}
	if e := entry(sample(), "q"); e.Sha256 != h {
		t.Fatal("Encode changed the index it was given")
	}
	x, err := Decode(&b, DefaultLimits)
	must(t, err)
	if got, want := mustJSON(t, x), mustJSON(t, sample()); got != want {
		t.Fatalf("decoded %s\nwant    %s", got, want)
	}
	v2 := sample()
	v2.Version = 2
	raw, err := v2.MarshalMsg(nil)
	must(t, err)
	if n := bytes.Count(raw, []byte(h)); n != 2 {
		t.Fatalf("version 2 writes q's hash %d times", n)
	}
	x, err = Decode(bytes.NewReader(zst(t, raw)), DefaultLimits)
	must(t, err)
	if got, want := mustJSON(t, x), mustJSON(t, v2); got != want {
		t.Fatalf("decoded %s\nwant    %s", got, want)
	}
}

// Snapshots written before MessagePack keep restoring: their index is version 1's JSON.
func TestAVersion1JSONIndexStillDecodes(t *testing.T) {
	v1 := sample()
	v1.Version = 1
	raw, err := json.Marshal(v1)
	must(t, err)
	x, err := Decode(bytes.NewReader(zst(t, raw)), DefaultLimits)
	must(t, err)
	if got, want := mustJSON(t, x), mustJSON(t, v1); got != want {
		t.Fatalf("decoded %s\nwant    %s", got, want)
	}
}

func TestAnIndexWhoseVersionIsNotItsEncodingsIsRefused(t *testing.T) {
	asJSON := sample() // version 2 in JSON
	raw, err := json.Marshal(asJSON)
	must(t, err)
	old := sample()
	old.Version = 1 // version 1 in MessagePack
	packed, err := old.MarshalMsg(nil)
	must(t, err)
	for name, raw := range map[string][]byte{"JSON saying 2": raw, "MessagePack saying 1": packed} {
		if _, err := Decode(bytes.NewReader(zst(t, raw)), DefaultLimits); err == nil || !strings.Contains(err.Error(), "version") {
			t.Errorf("%s: %v, want a refusal naming the version", name, err)
		}
	}
}

// A sandbox writes the index: a list that declares more elements than any tree has is refused before anything is
// allocated for them, and bytes after the index are not ignored.
func TestAnIndexDeclaringTooManyEntriesOrTrailingBytesIsRefused(t *testing.T) {
	head, err := appendIndexHead(nil, &Index{Version: Version, AvgChunk: 1024}, 1<<30)
	must(t, err)
	if _, err := Decode(bytes.NewReader(zst(t, head)), DefaultLimits); err == nil || !strings.Contains(err.Error(), msgp.ErrLimitExceeded.Error()) {
		t.Fatalf("an index declaring 2^30 entries: %v, want a refusal", err)
	}
	packed, err := sample().MarshalMsg(nil)
	must(t, err)
	if _, err := Decode(bytes.NewReader(zst(t, append(packed, 0xc0))), DefaultLimits); err == nil || !strings.Contains(err.Error(), "follow the index") {
		t.Fatalf("an index with a byte after it: %v, want a refusal", err)
	}
}

func mustJSON(t *testing.T, x *Index) string {
	t.Helper()
	b, err := json.Marshal(x)
	must(t, err)
	return string(b)
}

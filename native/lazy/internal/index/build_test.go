package index

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snapflow/native/lazy/internal/testkit"
)

func TestBuildTilesTheImageAndHashesItInOnePass(t *testing.T) {
	data := make([]byte, 5<<20+123)
	rand.New(rand.NewSource(1)).Read(data)
	idx, err := Build(bytes.NewReader(data), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Validate(); err != nil {
		t.Fatal(err)
	}
	whole := sha256.Sum256(data)
	if idx.SHA256 != hex.EncodeToString(whole[:]) || idx.Size != int64(len(data)) {
		t.Fatalf("whole-image hash or size wrong: %s %d", idx.SHA256, idx.Size)
	}
	for _, c := range idx.Chunks {
		sum := sha256.Sum256(data[c.Offset : c.Offset+c.Size])
		if hex.EncodeToString(sum[:]) != c.SHA256 {
			t.Fatalf("chunk at %d: wrong digest", c.Offset)
		}
		if c.Size > 4*64<<10 {
			t.Fatalf("chunk at %d is %d bytes, above the 4×avg maximum", c.Offset, c.Size)
		}
	}
	if n := len(idx.Chunks); n < 40 || n > 140 { // ~80 expected at 64 KiB average
		t.Fatalf("%d chunks for 5 MiB at 64 KiB average", n)
	}
}

func TestBuildRejectsAnAverageThatIsNotAPowerOfTwo(t *testing.T) {
	if _, err := Build(bytes.NewReader(nil), 500_000); err == nil {
		t.Fatal("want an error")
	}
}

func TestSpanFindsTheChunksUnderARange(t *testing.T) {
	idx := &Index{Version: 1, Size: 30, Chunks: []Chunk{{Offset: 0, Size: 10}, {Offset: 10, Size: 10}, {Offset: 20, Size: 10}}}
	cases := []struct {
		off, n      int64
		first, last int
		ok          bool
	}{{0, 1, 0, 0, true}, {9, 2, 0, 1, true}, {10, 10, 1, 1, true}, {5, 100, 0, 2, true}, {30, 1, 0, 0, false}, {0, 0, 0, 0, false}}
	for _, c := range cases {
		f, l, ok := idx.Span(c.off, c.n)
		if f != c.first || l != c.last || ok != c.ok {
			t.Errorf("Span(%d,%d) = %d,%d,%v want %d,%d,%v", c.off, c.n, f, l, ok, c.first, c.last, c.ok)
		}
	}
}

// Two squashfs images of trees that differ by ~10 MB must share most chunks: that is what makes a fork upload little.
func TestSquashfsImagesOfSimilarTreesShareMostChunks(t *testing.T) {
	dir := t.TempDir()
	base, changed := filepath.Join(dir, "base"), filepath.Join(dir, "changed")
	testkit.Tree(t, base, 1, 60<<20)
	testkit.Tree(t, changed, 1, 60<<20)
	testkit.Tree(t, filepath.Join(changed, "added"), 2, 10<<20) // ~10 MB of new files in a new directory
	a, b := indexOf(t, base, dir+"/a.sqfs"), indexOf(t, changed, dir+"/b.sqfs")
	have := map[string]bool{}
	for _, c := range a.Chunks {
		have[c.SHA256] = true
	}
	var shared, newBytes int64
	for _, c := range b.Distinct() {
		if have[c.SHA256] {
			shared++
		} else {
			newBytes += c.Size
		}
	}
	t.Logf("image a %d B / %d chunks, image b %d B / %d chunks; shared %d; b uploads %d B", a.Size, len(a.Chunks), b.Size, len(b.Chunks), shared, newBytes)
	if float64(shared) < 0.7*float64(len(a.Chunks)) {
		t.Fatalf("only %d of %d chunks shared", shared, len(a.Chunks))
	}
	if newBytes > 2*(b.Size-a.Size)+4<<20 {
		t.Fatalf("b would upload %d bytes for a %d-byte growth", newBytes, b.Size-a.Size)
	}
}

func indexOf(t *testing.T, tree, image string) *Index {
	t.Helper()
	testkit.Squashfs(t, tree, image)
	f, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idx, err := Build(f, 128<<10)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestSquashfsTablesAreReadFromTheSuperblockAndCheckedAgainstTheImage(t *testing.T) {
	sb := make([]byte, 96)
	copy(sb, "hsqs")
	binary.LittleEndian.PutUint64(sb[40:], 9_000) // bytes_used
	binary.LittleEndian.PutUint64(sb[64:], 7_000) // inode_table_start
	if got, ok := SquashfsTables(sb, 10_000); !ok || got != (Range{From: 7_000, To: 9_000}) {
		t.Fatalf("tables %+v ok %v, want [7000, 9000)", got, ok)
	}
	if _, ok := SquashfsTables(sb, 8_000); ok {
		t.Fatal("tables past the image's end: taken")
	}
	if _, ok := SquashfsTables(append([]byte("sqsh"), sb[4:]...), 10_000); ok {
		t.Fatal("no squashfs magic: taken")
	}
	idx := &Index{Version: Version, Size: 10_000, Chunks: []Chunk{{SHA256: strings.Repeat("a", 64), Offset: 0, Size: 10_000}}, Tables: &Range{From: 9_000, To: 10_001}}
	if err := idx.Validate(); err == nil {
		t.Fatal("an index whose tables run past its size validated")
	}
}

func TestIsDigestTakesOnly64LowercaseHexCharacters(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	if !IsDigest(good) {
		t.Fatalf("%s refused", good)
	}
	for _, bad := range []string{good[:63], good + "0", strings.ToUpper(good), good[:63] + "g", good[:63] + "/", ""} {
		if IsDigest(bad) {
			t.Fatalf("%q taken for a digest", bad)
		}
	}
}

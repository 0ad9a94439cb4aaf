package pack

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	json "github.com/goccy/go-json"
)

// baseEntry is an entry of a delta's base manifest as it was written: the fields a delta compares, with the optional
// ones' absence kept (owners are absent in manifests from before they were recorded, the lstat key in manifests from
// before single passes), so that an entry the delta keeps is written back as the agent's pass writes it
// (`{...old, stat}`): same fields, same order.
type baseEntry struct {
	Path   string  `json:"path"`
	Type   string  `json:"type"`
	Mode   uint32  `json:"mode"`
	Size   int64   `json:"size"`
	Mtime  int64   `json:"mtime"`
	UID    *uint32 `json:"uid,omitempty"`
	GID    *uint32 `json:"gid,omitempty"`
	Target string  `json:"target,omitempty"`
	Link   string  `json:"link,omitempty"`
	Holes  int64   `json:"holes,omitempty"`
	Sha256 string  `json:"sha256,omitempty"`
	Stat   *Stat   `json:"stat,omitempty"`
}

// baseManifest is the base's entries in its order, and where each path is among them.
type baseManifest struct {
	entries []baseEntry
	byPath  map[string]int
}

// BaseUnusable is the code of a base manifest the engine cannot use (missing, not a whole manifest, or not the bytes
// the base's record vouches for): nothing was written yet, and the agent makes the delta its own way, from the store's
// copy.
const BaseUnusable = "base_unusable"

func unusable(file, why string) error {
	return &Error{Code: BaseUnusable, Message: fmt.Sprintf("the kept base manifest %s %s", file, why)}
}

// readBase reads a whole-tree manifest (version 1) from file, entry by entry as the decoder reaches it (the file is
// ~10 MB for 31k entries: never read whole), and checks that its bytes hash to want.
func readBase(file, want string) (*baseManifest, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, unusable(file, fmt.Sprintf("cannot be read: %v", err))
	}
	defer f.Close()
	h := sha256.New()
	tee := io.TeeReader(f, h)
	b := &baseManifest{byPath: map[string]int{}}
	if err := decodeBase(json.NewDecoder(bufio.NewReaderSize(tee, 1<<20)), b); err != nil {
		return nil, unusable(file, fmt.Sprintf("is not a whole manifest: %v", err))
	}
	// The decoder stops at the object's end: what follows is hashed too, so the bytes checked are the file's.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return nil, unusable(file, fmt.Sprintf("cannot be read: %v", err))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, unusable(file, fmt.Sprintf("has sha256 %s; its record says %s", got, want))
	}
	return b, nil
}

func decodeBase(dec *json.Decoder, b *baseManifest) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	version := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		switch key {
		case "version":
			if err := dec.Decode(&version); err != nil {
				return err
			}
		case "entries":
			if err := expectDelim(dec, '['); err != nil {
				return err
			}
			for dec.More() {
				b.entries = append(b.entries, baseEntry{})
				e := &b.entries[len(b.entries)-1]
				if err := dec.Decode(e); err != nil {
					return err
				}
				if _, dup := b.byPath[e.Path]; dup {
					return fmt.Errorf("%s is listed twice", e.Path)
				}
				b.byPath[e.Path] = len(b.entries) - 1
			}
			if err := expectDelim(dec, ']'); err != nil {
				return err
			}
		default: // totals, selection: the delta counts its own
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
	}
	if version != 1 {
		return fmt.Errorf("version %d, not 1", version)
	}
	return expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("found %v where %q was expected", t, want)
	}
	return nil
}

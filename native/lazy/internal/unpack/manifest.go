package unpack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	// goccy/go-json decodes the npm workspace's 9.9 MB manifest ~4x faster than encoding/json, with the same
	// Decoder API (Token, More, Decode) and the same refusals (a float where an int64 is declared).
	json "github.com/goccy/go-json"
)

// Want is one entry of the expected manifest (protocol.ts ManifestEntry), the fields a restore compares. An absent
// optional string is "" and an absent owner nil, as the agent's comparison sees undefined.
type Want struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Mode   *int64 `json:"mode"`
	Size   *int64 `json:"size"`
	Mtime  *int64 `json:"mtime"`
	Target string `json:"target"`
	Sha256 string `json:"sha256"`
	Link   string `json:"link"`
	UID    *int64 `json:"uid"`
	GID    *int64 `json:"gid"`
	Holes  int64  `json:"holes"`
	// the archive held it (a second entry of the same name is then extra, as in the agent's check)
	seen bool
}

// Expected is the manifest in its own order (missing entries are named in it) and by path.
type Expected struct {
	Entries []*Want
	byPath  map[string]*Want
}

func (x *Expected) lookup(path string) *Want { return x.byPath[path] }

// Lookup is the manifest's entry of that path, or nil.
func (x *Expected) Lookup(path string) *Want { return x.byPath[path] }

// NewExpected is a manifest made of entries already decoded (a file-level index's, internal/filecas).
func NewExpected(entries []*Want) *Expected {
	x := &Expected{Entries: entries, byPath: make(map[string]*Want, len(entries))}
	for _, w := range entries {
		x.byPath[w.Path] = w
	}
	return x
}

// ManifestSource is where the manifest is: a file in the sandbox, or a presigned URL whose SHA-256 the snapshot's
// record keeps. Field names the request field in errors, as the agent's loadManifest does.
type ManifestSource struct {
	File   string `json:"file,omitempty"`
	URL    string `json:"url,omitempty"`
	Sha256 string `json:"sha256,omitempty"`
}

// LoadManifest reads and checks the expected manifest: at most maxBytes, the SHA-256 the record keeps, a version 1
// manifest whose entries have the fields a restore compares. The JSON is decoded as it streams (json.Decoder, entry
// by entry): only the entries are kept, never the text.
func LoadManifest(src ManifestSource, field string, maxBytes int64, get func(url string) (io.ReadCloser, error)) (*Expected, error) {
	var body io.ReadCloser
	var err error
	switch {
	case src.File != "":
		body, err = os.Open(src.File)
		if errors.Is(err, os.ErrNotExist) {
			return nil, &Error{Code: "not_found", Message: field + ".file: no manifest file there", Field: field + ".file"}
		}
	case src.URL != "":
		body, err = get(src.URL)
	default:
		return nil, &Error{Code: "bad_request", Message: field + ": no manifest named", Field: field}
	}
	if err != nil {
		return nil, err
	}
	defer body.Close()
	h := sha256.New()
	counted := &limitedReader{r: body, left: maxBytes}
	x, decodeErr := decodeManifest(io.TeeReader(counted, h), field)
	// The rest (trailing whitespace) is hashed too: the record's SHA-256 is of the whole object.
	if decodeErr == nil {
		_, decodeErr = io.Copy(io.Discard, io.TeeReader(counted, h))
	}
	if counted.over {
		return nil, &Error{Code: "bad_request", Message: fmt.Sprintf("%s: the stored manifest is over %d bytes, more than this agent reads (%d: SNAPFLOW_MAX_MANIFEST_BYTES)", field, maxBytes, maxBytes), Field: field}
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	if src.Sha256 != "" {
		if got := hex.EncodeToString(h.Sum(nil)); got != src.Sha256 {
			return nil, &Error{Code: "verify_failed", Message: fmt.Sprintf("%s: the stored manifest has sha256 %s, its snapshot's record says %s", field, got, src.Sha256), Field: field}
		}
	}
	return x, nil
}

var entryTypes = map[string]bool{"file": true, "dir": true, "symlink": true, "other": true}

func decodeManifest(r io.Reader, field string) (*Expected, error) {
	notJSON := &Error{Code: "bad_request", Message: field + ": not a JSON manifest", Field: field}
	invalid := func(why string) error {
		return &Error{Code: "bad_request", Message: fmt.Sprintf("%s: not a manifest (%s)", field, why), Field: field}
	}
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, notJSON
	}
	x := &Expected{byPath: map[string]*Want{}}
	var version json.Number
	hasEntries := false
	dec.UseNumber()
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, notJSON
		}
		key, _ := t.(string)
		switch key {
		case "version":
			if err := dec.Decode(&version); err != nil {
				return nil, invalid("version: expected a number")
			}
		case "entries":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return nil, invalid("entries: expected an array")
			}
			hasEntries = true
			for i := 0; dec.More(); i++ {
				w := &Want{}
				if err := dec.Decode(w); err != nil {
					return nil, invalid(fmt.Sprintf("entries.%d: %v", i, err))
				}
				if !entryTypes[w.Type] || w.Mode == nil || w.Size == nil || w.Mtime == nil {
					return nil, invalid(fmt.Sprintf("entries.%d: type, mode, size and mtime are required", i))
				}
				x.Entries = append(x.Entries, w)
				x.byPath[w.Path] = w
			}
			if _, err := dec.Token(); err != nil {
				return nil, notJSON
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, notJSON
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, notJSON
	}
	if version.String() == "2" {
		return nil, &Error{Code: "bad_request", Message: field + ": a layer manifest (version 2) needs its base's; the engine reads whole manifests only", Field: field}
	}
	if version.String() != "1" || !hasEntries {
		return nil, invalid("version: expected 1, with entries")
	}
	return x, nil
}

// limitedReader reads at most left bytes and notes whether the source had more.
type limitedReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			l.over = true
			return 0, errors.New("manifest too large")
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

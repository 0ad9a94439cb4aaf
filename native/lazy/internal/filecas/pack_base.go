package filecas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"snapflow/native/lazy/internal/pack"
)

// BaseSource is where an incremental's base index is: the sandbox's kept copy (File), else the store's (URL), and
// the SHA-256 the base's record vouches for. The URL is a credential: it comes on stdin, never argv.
type BaseSource struct {
	File   string `json:"file,omitempty"`
	URL    string `json:"url,omitempty"`
	Sha256 string `json:"sha256"`
	// Stat: a restored tree's stat keys for this index (stats.go), taken instead of the index's own when they belong
	// to it; absent or another index's, the index's own keys (another sandbox's, after a restore: files are read).
	Stat string `json:"stat,omitempty"`
	// Layers: the tree is an overlay whose lowest layer is this index's own tree (files-mount), under these layer
	// directories, lowest first (lower.go): a file in none of them is the base's.
	Layers []string `json:"layers,omitempty"`
	// Chain: when the base is a layer (layer.go), the objects beneath it, its whole index first, each a kept file or
	// the store's object (the layer names each one's SHA-256, which Sha256 here repeats from the record).
	Chain []ChainObject `json:"chain,omitempty"`
	// Timeout and Retries bound the GET (each attempt; attempts after the first on a network error or 5xx).
	Timeout time.Duration `json:"-"`
	Retries int           `json:"-"`
}

// ChainObject is one object of an index's chain: a kept file when it is there and hashes to Sha256, else the URL's.
type ChainObject struct {
	File   string `json:"file,omitempty"`
	URL    string `json:"url,omitempty"`
	Sha256 string `json:"sha256"`
}

type baseRead struct {
	index *Index
	// depth: the base's layers over its whole index (layer.go)
	depth int
	// over: what a layer this pass writes lies over — the base, or (rebased: layer.go) the whole index beneath it —
	// with that object's SHA-256 and its depth
	over      *Index
	overSha   string
	overDepth int
	// stored: each entry's lstat key as the base's index holds it, before a stats file's keys replaced it
	stored []pack.Stat
	table  *chunkTable
	err    error
	// ms: when it was ready, from the pass's start
	ms int64
}

func unusable(why string) error {
	return &pack.Error{Code: pack.BaseUnusable, Field: "base", Message: "the base index " + why}
}

// readBase is the base index: each object of its chain (its own last), the kept file when it is there and hashes to
// its SHA-256, else the URL's object, which must; read at once, each whole within DefaultLimits.MaxCompressed (the
// npm workspace's whole index is ~2.9 MB), then decoded, composed and validated. Anything else is base_unusable:
// nothing has been written yet, and the caller can make a full backup.
func readBase(b *BaseSource) (*Index, int, [][]byte, error) {
	objects := append(append([]ChainObject{}, b.Chain...), ChainObject{File: b.File, URL: b.URL, Sha256: b.Sha256})
	bodies, at, err := ReadChain(len(objects), func(i int) ([]byte, error) { return readObject(&objects[i], b.Timeout, b.Retries) })
	if err != nil && at < len(objects)-1 {
		return nil, 0, nil, unusable(fmt.Sprintf("chain object %d: %v", at, err))
	} else if err != nil {
		return nil, 0, nil, unusable(err.Error())
	}
	// Each object was checked against its SHA-256 as it was read (readObject): the layers' parents are not hashed again.
	shas := make([]string, len(objects))
	for i, o := range objects {
		shas[i] = o.Sha256
	}
	x, depth, err := DecodeChainOf(bodies, shas, DefaultLimits, nil)
	if err != nil {
		return nil, 0, nil, unusable(err.Error())
	}
	return x, depth, bodies, nil
}

// rebaseOver: a layer over a base MaxDepth deep lies over the chain's whole index instead (depth 1), holding what
// every layer between changed — while their objects together are at most a quarter of the whole index's (the
// rebased layer is about their union); past that, the pass writes a whole index. The whole index, decoded (and its
// elided hashes filled, as the composition's are) to compare with, or nil.
func rebaseOver(bodies [][]byte) (*Index, error) {
	if len(bodies) < 2 {
		return nil, nil
	}
	layers := 0
	for _, b := range bodies[1:] {
		layers += len(b)
	}
	if layers > len(bodies[0])/4 {
		return nil, nil
	}
	// A chain of one object is a whole index, validated; decoded from the bytes already read, not copied again.
	whole, _, err := DecodeChainOf(bodies[:1], nil, DefaultLimits, nil)
	return whole, err
}

// readObject is one index object: the kept file when it is there and hashes to o.Sha256, else the URL's, which must.
func readObject(o *ChainObject, timeout time.Duration, retries int) ([]byte, error) {
	if !sha256Hex.MatchString(o.Sha256) {
		return nil, fmt.Errorf("has no usable sha256 (%q)", o.Sha256)
	}
	var body []byte
	why := errors.New("names neither a file nor a URL")
	if o.File != "" {
		f, err := os.Open(o.File)
		if err == nil {
			size := int64(0)
			if st, serr := f.Stat(); serr == nil {
				size = st.Size()
			}
			body, err = readCapped(f, size)
			f.Close()
		}
		if err == nil && sum(body) != o.Sha256 {
			err = fmt.Errorf("has sha256 %s; its record says %s", sum(body), o.Sha256)
		}
		if err != nil {
			body, why = nil, fmt.Errorf("file %s: %v", o.File, err)
		}
	}
	if body == nil && o.URL != "" {
		var err error
		if body, err = GetIndex(o.URL, timeout, retries); err == nil && sum(body) != o.Sha256 {
			err = fmt.Errorf("the stored index has sha256 %s; its record says %s", sum(body), o.Sha256)
		}
		return body, err
	}
	if body == nil {
		return nil, why
	}
	return body, nil
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var errTooLarge = fmt.Errorf("is larger than its bound, %d bytes", DefaultLimits.MaxCompressed)

func readCapped(r io.Reader, size int64) ([]byte, error) {
	// Into a buffer of the length the store announced (within the bound), not one grown by doubling from 512 bytes:
	// a wake reads its 2.9 MB index before its tree answers, and each doubling copied and faulted in what it held.
	buf := bytes.NewBuffer(make([]byte, 0, min(max(size, 0), DefaultLimits.MaxCompressed)+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(r, DefaultLimits.MaxCompressed+1))
	body := buf.Bytes()
	if err == nil && int64(len(body)) > DefaultLimits.MaxCompressed {
		err = errTooLarge
	}
	return body, err
}

// GetIndex GETs a stored index object whole, within DefaultLimits.MaxCompressed, retrying network errors, 5xx and
// 429 (each attempt bounded by timeout; 0: 60 s). The caller checks its SHA-256 before acting on it.
func GetIndex(rawURL string, timeout time.Duration, retries int) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, errors.New("url is not an http(s) URL")
	}
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		body, retry, err := getOnce(rawURL, timeout)
		if err == nil || !retry || attempt >= retries {
			return body, err
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

func getOnce(u string, timeout time.Duration) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, errors.New("url: the request cannot be made")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// *url.Error carries the URL, whose query is a credential: keep only what failed.
		return nil, true, fmt.Errorf("GET of the stored index failed: %v", errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode >= 500 || resp.StatusCode == 429, fmt.Errorf("GET of the stored index answered %d", resp.StatusCode)
	}
	body, err := readCapped(resp.Body, resp.ContentLength)
	if err != nil {
		return nil, !errors.Is(err, errTooLarge), fmt.Errorf("the stored index: %v", err)
	}
	return body, false, nil
}

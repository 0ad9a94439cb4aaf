package filecas

import (
	"fmt"
	"slices"
	"strings"
)

// use is one place a chunk's bytes go: position pos of a file's chunk list, at dataOff of its data (its data
// regions concatenated).
type use struct {
	f       *fileState
	pos     int
	dataOff int64
}

// request is one Range GET: [start, end) of a pack, holding chunks (indexes into Index.Chunks, by offset).
type request struct {
	pack       int
	start, end int64
	chunks     []int
}

// plan is what a restore fetches: each distinct chunk once, with every place it goes, in coalesced requests; the
// requests in chains, each run by one fetcher in order.
type plan struct {
	files    []*fileState
	uses     map[int][]use
	requests []request
	chains   [][]request
}

// storedBound is the most a zstd frame of size bytes can take (ZSTD_COMPRESSBOUND, with room for the frame's
// header and checksum): a chunk said to be larger is refused before any buffer is sized by it.
func storedBound(size int64) int64 { return size + size/128 + 1024 }

// makePlan lists the files with content, maps each chunk to its uses (a chunk named twice in the index by the same
// SHA-256 and size is fetched once), and coalesces each pack's chunks in offset order into requests: the next chunk
// joins the request when the gap before it is at most gap bytes (read and discarded) and the request stays within
// span bytes (a single larger chunk is a request of its own). Every pack a needed chunk lies in must have a URL.
func makePlan(x *Index, urls map[string]string, gap, span int64) (*plan, error) {
	p := &plan{uses: map[int][]use{}}
	canonical := make(map[string]int, len(x.Chunks))
	same := func(c int) int {
		ch := &x.Chunks[c]
		if first, ok := canonical[ch.Sha256]; ok && x.Chunks[first].Size == ch.Size {
			return first
		}
		canonical[ch.Sha256] = c
		return c
	}
	canon := make([]int, len(x.Chunks))
	for c := range x.Chunks {
		canon[c] = same(c)
	}
	for i := range x.Entries {
		e := &x.Entries[i]
		if e.Type != "file" || e.Link != "" || len(e.Chunks) == 0 || e.Path == "" {
			continue // the root ("") is the staging directory itself: never made, as the tree pass skips it
		}
		f := newFileState(e, x)
		p.files = append(p.files, f)
		var off int64
		for pos, c := range e.Chunks {
			c = canon[c]
			p.uses[c] = append(p.uses[c], use{f: f, pos: pos, dataOff: off})
			off += x.Chunks[c].Size
		}
	}
	needed := make([]int, 0, len(p.uses))
	for c := range p.uses {
		ch := &x.Chunks[c]
		if ch.Stored > storedBound(ch.Size) {
			return nil, refused("chunks", fmt.Sprintf("chunk %d (%s) is said to take %d bytes stored for %d: more than any zstd frame of it", c, ch.Sha256, ch.Stored, ch.Size))
		}
		needed = append(needed, c)
	}
	var missing []string
	for _, c := range needed {
		name := x.Packs[x.Chunks[c].Pack].Name
		if urls[name] == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, &Error{Code: "bad_request", Field: "packs", Message: fmt.Sprintf("packs: no URL for the pack(s) the index's chunks lie in: %s", strings.Join(missing, ", "))}
	}
	slices.SortFunc(needed, func(a, b int) int {
		ca, cb := &x.Chunks[a], &x.Chunks[b]
		if ca.Pack != cb.Pack {
			return ca.Pack - cb.Pack
		}
		if ca.Offset != cb.Offset {
			if ca.Offset < cb.Offset {
				return -1
			}
			return 1
		}
		return a - b
	})
	for _, c := range needed {
		ch := &x.Chunks[c]
		end := ch.Offset + ch.Stored
		if n := len(p.requests); n > 0 {
			r := &p.requests[n-1]
			// Joined only forward: a chunk overlapping the one before it (an odd index) starts a request of its own.
			if r.pack == ch.Pack && ch.Offset >= r.end && ch.Offset-r.end <= gap && end-r.start <= span {
				r.end, r.chunks = end, append(r.chunks, c)
				continue
			}
		}
		p.requests = append(p.requests, request{pack: ch.Pack, start: ch.Offset, end: end, chunks: []int{c}})
	}
	p.chains = chain(p.requests, p.uses)
	return p, nil
}

// chain groups the requests so that one that holds a later chunk of a file the request before it holds runs after
// it, on the same fetcher: a file larger than a request (one of 143 MB in the npm workspace) then comes in order and
// is hashed as written, instead of its later chunks arriving first on other fetchers and being read back.
func chain(requests []request, uses map[int][]use) [][]request {
	var chains [][]request
	lastIn := map[*fileState]int{} // the request a file's latest chunk so far lies in
	for i, q := range requests {
		continues := false
		for _, c := range q.chunks {
			for _, u := range uses[c] {
				if last, ok := lastIn[u.f]; ok && last == i-1 {
					continues = true
				}
				lastIn[u.f] = i
			}
		}
		if continues && len(chains) > 0 {
			chains[len(chains)-1] = append(chains[len(chains)-1], q)
		} else {
			chains = append(chains, []request{q})
		}
	}
	return chains
}

// piece is where a run of a chunk's bytes lies in its file: data[from:to] at file offset at.
type piece struct {
	at       int64
	from, to int
}

// pieces maps a chunk's bytes, at dataOff of the file's data and size long, onto the file's data regions.
func pieces(regions [][2]int64, dataOff int64, size int, out []piece) []piece {
	out = out[:0]
	var d int64 // data offset where the current region starts
	done := 0
	for _, r := range regions {
		if done == size {
			break
		}
		want := dataOff + int64(done)
		if want >= d+r[1] {
			d += r[1]
			continue
		}
		n := min(int64(size-done), d+r[1]-want)
		out = append(out, piece{at: r[0] + want - d, from: done, to: done + int(n)})
		done += int(n)
		d += r[1]
	}
	return out
}

package filecas

// Backup: the file-level backup. One pass over a tree that writes its manifest (pack's, byte for byte), its index and
// the pack of the chunks no earlier snapshot of its lineage had.
//
//	base index (file or GET; SHA-256 checked, Decode validates) ──┐  read while the tree is walked
//	walk (pack's: descriptors, the agent's order, the selection) ─┴─▶ for each entry, in walk order:
//	    regular file unchanged since the base by restic's rule (pack.UnchangedFile) → the base's chunks, sha256,
//	        data regions: the file is not opened
//	    else read once (pack_read.go): SHA-256 of the content (holes as zeros) and FastCDC over its data regions,
//	        SHA-256 per chunk; a chunk the base or this pass already has is referenced, a new one goes on
//	    ──▶ new chunks: one zstd frame each, compressed on every core, written in the order found (pack_frames.go)
//	        ──▶ the pack (SHA-256, count) ──▶ out (the caller's: parts PUT as they fill, or a file)
//	    ──▶ the manifest entry (nameless file until the end), the index entry (memory)
//	out closed (every part stored) ──▶ the index: the referenced chunks, the base's packs still referenced, this
//	pack ──▶ zstd JSON, named at opts.Index; the manifest named at opts.Manifest
//
// A base that cannot be used fails with base_unusable before a byte is written to out; any failure leaves neither
// the manifest nor the index behind.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"snapflow/native/lazy/internal/pack"
)

// DefaultAvgChunk is FastCDC's average chunk size when the request names none (min avg/4, max avg*4).
const DefaultAvgChunk = 1 << 20

// Options: what to back up, and how.
type Options struct {
	Root string
	// Manifest: where the manifest is written; "" writes none (its size and SHA-256 are still answered: files-manifest
	// makes it again from the index, byte for byte).
	Manifest string
	Index    string
	// Name names the pack this pass writes (the snapshot's id).
	Name      string
	AvgChunk  int
	Level     int
	Selection *pack.Selection
	Base      *BaseSource
	// Layer: over a base, write the index as a layer over it (layer.go); over a base MaxDepth deep, over the whole
	// index beneath it (rebased), or a whole index once the layers outgrow that. Over an overlay (Base.Layers,
	// lower.go) too: a sleep of a woken tree; a compaction asks for a whole index.
	Layer bool
	// Stats: where the tree's own lstat keys are written when a layer keeps its parent's for entries whose only
	// change is their key (a restored tree): the next backup here takes them (stats.go), bound to this index.
	Stats string
	// Threads compress at once (0: one per CPU).
	Threads int
	// Lie is a test-only fault: the first non-empty regular file's SHA-256, in the manifest and the index, is not its
	// content's — what a compromised source can write, for the tests that watch a restore refuse it.
	Lie bool
}

// Sink takes the pack's bytes. Close is called after the last one and before the index and the manifest are named,
// so that a pack the store did not take leaves neither behind.
type Sink interface {
	io.Writer
	Close() error
}

// Result is what a pass made, beside the manifest's summary.
type Result struct {
	pack.Summary
	WalkMs int64 `json:"walkMs"`
	// Where the pass's time went, each from its start: the base read, decoded and tabled (BaseMs, beside the walk);
	// the last entry read and chunked (ReadMs); the pack's last parts stored (StoredMs).
	BaseMs   int64     `json:"baseMs"`
	ReadMs   int64     `json:"readMs"`
	StoredMs int64     `json:"storedMs"`
	Ms       int64     `json:"ms"`
	Index    IndexMade `json:"index"`
	// Depth: the index's layers over its whole index (0: it is a whole index); Removed: the names a layer drops.
	Depth   int `json:"depth"`
	Removed int `json:"removed"`
	// Pack is nil when no chunk was new: nothing was written to the sink.
	Pack *Pack `json:"pack"`
	// Packs: every pack the index names (the base's still referenced, and this one), which the Worker checks against
	// the parent's record before it keeps them as the snapshot's.
	Packs  []PackRef `json:"packs"`
	Read   Counts    `json:"read"`
	Reused Counts    `json:"reused"`
	// NewChunks and NewBytes: the chunks the pack holds, and their bytes before compression.
	NewChunks int   `json:"newChunks"`
	NewBytes  int64 `json:"newBytes"`
	// Selection: the manifest's selection record (nil: none), which the index does not hold; with the index it makes
	// the manifest again (Index.WriteManifest).
	Selection *pack.Record `json:"selection,omitempty"`
}

// PackRef names a pack and its size.
type PackRef struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// IndexMade is the index file written: its bytes, SHA-256 and how many chunks it lists.
type IndexMade struct {
	Bytes  int64  `json:"bytes"`
	Sha256 string `json:"sha256"`
	Chunks int    `json:"chunks"`
}

// Counts are files and their bytes (read: data bytes read; reused: sizes of the files taken from the base).
type Counts struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Backup backs opts.Root up into out (the new chunks' frames), opts.Manifest and opts.Index.
func Backup(opts Options, out Sink) (Result, error) {
	started := time.Now()
	avg := opts.AvgChunk
	if avg == 0 {
		avg = DefaultAvgChunk
	}
	if avg < 1<<10 || avg > int(DefaultLimits.MaxChunk/4) || avg&(avg-1) != 0 {
		return Result{}, &pack.Error{Code: "bad_request", Field: "avgChunk", Message: fmt.Sprintf("avgChunk: %d is not a power of two from 1 KiB to %d", avg, DefaultLimits.MaxChunk/4)}
	}
	if !packName.MatchString(opts.Name) {
		return Result{}, &pack.Error{Code: "bad_request", Field: "name", Message: fmt.Sprintf("name: %q is not a snapshot id (letters, digits, '-', '_')", opts.Name)}
	}
	// Over layers (a compaction: lower.go), the walk leaves out what no layer touched: it needs their names first.
	var layered map[string]struct{}
	if opts.Base != nil && len(opts.Base.Layers) > 0 {
		var err error
		if layered, err = layerNames(opts.Base.Layers); err != nil {
			return Result{}, err
		}
	}
	// The base is read (and its chunks' table made) while the tree is walked.
	based := make(chan baseRead, 1)
	go func() {
		if opts.Base == nil {
			based <- baseRead{table: newChunkTable(nil, false)}
			return
		}
		x, depth, bodies, err := readBase(opts.Base)
		if err != nil {
			based <- baseRead{err: err}
			return
		}
		over, overSha, overDepth := x, opts.Base.Sha256, depth
		if opts.Layer && depth >= MaxDepth {
			whole, err := rebaseOver(bodies)
			if err != nil {
				based <- baseRead{err: unusable(err.Error())}
				return
			}
			over, overSha, overDepth = whole, opts.Base.Chain[0].Sha256, 0
		}
		var stored []pack.Stat
		layer := opts.Layer && over != nil
		if layer {
			// the keys as the index laid over holds them, before a stats file replaces the base's
			stored = make([]pack.Stat, len(over.Entries))
			for i := range over.Entries {
				stored[i] = over.Entries[i].Stat
			}
		}
		if opts.Base.Stat != "" {
			if _, err := applyStats(x, opts.Base.Sha256, opts.Base.Stat); err != nil {
				based <- baseRead{err: unusable("stat file: " + err.Error())}
				return
			}
		}
		table := newChunkTable(x, layer)
		if layer {
			table.from = [2]int{len(over.Chunks), len(over.Packs)}
		}
		based <- baseRead{index: x, depth: depth, over: over, overSha: overSha, overDepth: overDepth, stored: stored, table: table, ms: time.Since(started).Milliseconds()}
	}()
	pass, err := pack.NewPass(opts.Root, opts.Manifest, opts.Selection)
	if err != nil {
		<-based
		return Result{}, err
	}
	fail := func(err error) (Result, error) {
		pass.Abandon()
		return Result{}, err
	}
	walk, err := pass.WalkPruned(descendInto(layered))
	if err != nil {
		<-based
		return fail(err)
	}
	walkMs := time.Since(started).Milliseconds()
	read := <-based
	if read.err != nil {
		return fail(read.err)
	}
	base := read.index
	if base != nil {
		for _, p := range base.Packs {
			if p.Name == opts.Name {
				return fail(&pack.Error{Code: "bad_request", Field: "name", Message: fmt.Sprintf("name: the base already has a pack named %q; a pass writes a pack of its own name", opts.Name)})
			}
		}
	}

	table := read.table
	frames, err := newFramer(out, opts.Level, opts.Threads, avg)
	if err != nil {
		return fail(err)
	}
	r := &reader{root: pass.Root(), avg: avg, table: table, frames: frames, whole: sha256.New(), dir: -1, layered: layered}
	emit, err := newEmitter(pass, func(i int) string { return r.table.refs[i].Sha256 }, opts.Lie)
	if err != nil {
		frames.close()
		return fail(err)
	}
	var lay *layering
	if read.stored != nil {
		lay = &layering{over: read.over, stored: read.stored, met: make([]bool, len(read.over.Entries))}
	}
	reused, err := r.entries(walk, base, emit, lay)
	r.close()
	written, werr := frames.close()
	readMs := time.Since(started).Milliseconds()
	if eerr := emit.close(); err == nil {
		err = eerr
	}
	if err == nil {
		err = werr
	}
	if err != nil {
		return fail(err)
	}
	// The pack's last bytes are written: the index is written while its last parts are stored, and named (with the
	// manifest) only once they are.
	closed := make(chan error, 1)
	go func() { closed <- out.Close() }()
	var x *Index
	if lay != nil {
		x = table.layer(avg, opts.Name, written)
		x.Layer = &Layer{Parent: read.overSha, Depth: read.overDepth + 1, Removed: lay.removed()}
	} else {
		x = table.index(avg, opts.Name, written)
	}
	idx, err := newIndexFile(opts.Index)
	if err != nil {
		<-closed
		return fail(err)
	}
	made, err := idx.write(x, emit.n, emit.entries.Bytes())
	// The tree's own stat keys (a layer that kept its parent's: layering.inLayer), bound to the index just written,
	// are written while the pack's last parts are stored. Best effort, as files-unpack's: without them the next
	// backup here reads the files it would have kept.
	statsWritten := make(chan struct{})
	wroteStats := err == nil && lay != nil && len(lay.keys) > 0 && opts.Stats != ""
	go func() {
		defer close(statsWritten)
		if wroteStats {
			writeStatsFile(&StatsFile{Version: 1, Index: made.Sha256, Files: lay.keys}, opts.Stats)
		}
	}()
	if cerr := <-closed; err == nil {
		err = cerr
	}
	storedMs := time.Since(started).Milliseconds()
	<-statsWritten
	if err == nil {
		err = pass.Finish()
	} else {
		pass.Abandon()
	}
	if err != nil {
		idx.abandon()
		if wroteStats {
			os.Remove(opts.Stats)
		}
		return Result{}, err
	}
	if err := idx.name(); err != nil {
		if opts.Manifest != "" {
			os.Remove(opts.Manifest) // named a moment ago: without its index it speaks for nothing
		}
		if wroteStats {
			os.Remove(opts.Stats)
		}
		return Result{}, err
	}
	res := Result{Summary: pass.Summary(), WalkMs: walkMs, BaseMs: read.ms, ReadMs: readMs, StoredMs: storedMs, Index: made, Read: r.read, Reused: reused, NewChunks: frames.chunks, NewBytes: frames.raw, Selection: pass.Record()}
	if written.n > 0 {
		res.Pack = &Pack{Name: opts.Name, Bytes: written.n, Sha256: hex.EncodeToString(written.h.Sum(nil))}
	}
	packs := x.Packs
	if x.Layer != nil {
		// A layer's packs count on from its parent's: the snapshot needs them all.
		packs = append(append([]Pack{}, base.Packs...), x.Packs...)
		res.Index.Chunks = len(table.refs)
		res.Depth, res.Removed = x.Layer.Depth, len(x.Layer.Removed)
	}
	res.Packs = make([]PackRef, len(packs))
	for i, p := range packs {
		res.Packs[i] = PackRef{Name: p.Name, Bytes: p.Bytes}
	}
	res.Ms = time.Since(started).Milliseconds()
	return res, nil
}

// layering is what a pass writing a layer (layer.go) keeps: the index the layer lies over (the base, or the whole
// index beneath a base MaxDepth deep), its entries the pass met, and the tree's own keys of the files whose entries
// keep that index's.
type layering struct {
	over *Index
	// at: the next of over's entries to meet (both in walk order)
	at int
	// stored: over's lstat keys as its index holds them (a stats file may have replaced the base's)
	stored []pack.Stat
	met    []bool
	keys   [][5]string
}

// removed: the names of the index laid over that the pass did not meet, in walk order.
func (l *layering) removed() []string {
	out := []string{}
	for i, met := range l.met {
		if !met {
			out = append(out, l.over.Entries[i].Path)
		}
	}
	return out
}

// inLayer: whether e, the pass's next entry in walk order, goes into the layer: it differs from the entry of its
// name in the index laid over, or that has none. An entry whose only change is its lstat key keeps that index's (so
// the manifest, made again from the composed index, is this pass's), and the tree's own key is kept for the stats
// file.
func (l *layering) inLayer(e *Entry) bool {
	old := priorEntry(l.over.Entries, &l.at, e.Path)
	if old == nil {
		return true
	}
	i := l.at - 1
	l.met[i] = true
	if !sameButStat(e, old) {
		return true
	}
	if own := e.Stat; own != l.stored[i] {
		if e.Type == "file" && e.Link == "" {
			l.keys = append(l.keys, [5]string{e.Path, own.Ino, own.Dev, own.MtimeNs, own.CtimeNs})
		}
		e.Stat = l.stored[i]
	}
	return false
}

// sameButStat: a and b are the same entry but perhaps for their lstat keys (chunk numbers compared as they are: a
// layer's table keeps its base's).
func sameButStat(a, b *Entry) bool {
	x, y := a.Entry, b.Entry
	x.Stat, y.Stat = pack.Stat{}, pack.Stat{}
	return x == y && a.Node == b.Node && slices.Equal(a.Chunks, b.Chunks) && slices.Equal(a.Data, b.Data)
}

// entries makes the index's entries in walk order and hands them to emit; answers the files taken from the base.
// Writing a layer (lay), only the entries that changed go into the index; every one goes into the manifest.
func (r *reader) entries(walk []pack.Walked, base *Index, emit *emitter, lay *layering) (Counts, error) {
	var prior []Entry
	if base != nil {
		prior = base.Entries
	}
	at := 0 // the base's entries are in walk order: the next one to meet
	var reused Counts
	// sizeOf: the size of each first name of a file with several links, which its later names record
	sizeOf := map[string]int64{}
	for i := range walk {
		w := &walk[i]
		st := w.Lstat()
		var e Entry
		old := priorEntry(prior, &at, w.Path())
		if w.Kind() == "file" && w.Link() == "" {
			if st.Nlink > 1 {
				sizeOf[w.Path()] = st.Size
			}
			// Unchanged: the base's entry is what pack would write (the rule compares every field lstat gives, and
			// the lstat key is the base's), content included; or, over an overlay, no layer touched it (lower.go).
			if old != nil && old.Type == "file" && (pack.UnchangedFile(w, &old.Entry) || fromLower(r.layered, w, old)) {
				e = Entry{Entry: old.Entry, Data: old.Data, Chunks: make([]int, len(old.Chunks))}
				e.Stat = pack.EntryOf(w).Stat // the tree's own key (over an overlay, not the base's)
				for k, c := range old.Chunks {
					e.Chunks[k] = r.table.refBase(c)
				}
				reused.Files++
				reused.Bytes += e.Size
			} else {
				e.Entry = pack.EntryOf(w)
				if err := r.file(w, &e); err != nil {
					return reused, err
				}
			}
		} else {
			e.Entry = pack.EntryOf(w)
			switch {
			case e.Type == "other":
				e.Node = nodeOf(st.Mode)
			case e.Type == "file": // a later name of a file with several links
				e.Link, e.Size = w.Link(), sizeOf[w.Link()]
			case e.Type == "dir" && r.layered != nil && !touched(r.layered, w.Path()):
				// Not walked below (lower.go): everything beneath is the base's, entry for entry (in a layer, none of it).
				emit.add(e, lay == nil || lay.inLayer(&e))
				took, err := r.graft(prior, &at, old, w.Path(), emit, lay)
				reused.Files += took.Files
				reused.Bytes += took.Bytes
				if err != nil {
					return reused, err
				}
				continue
			}
		}
		inIndex := lay == nil || lay.inLayer(&e) // before e is handed on: it may take the base's key
		emit.add(e, inIndex)
	}
	return reused, nil
}

// priorEntry is the base's entry for path, found by merging: both lists are in walk order, so it is the next entry (or one
// after those the tree no longer has); a path the base lacks leaves the place as it was. A base out of that order
// (made by something else) only finds fewer entries: their files are read again.
func priorEntry(prior []Entry, at *int, path string) *Entry {
	for i := *at; i < len(prior); i++ {
		if prior[i].Path == path {
			*at = i + 1
			return &prior[i]
		}
		if walkOrder(prior[i].Path, path) >= 0 { // after it (or a name that is not UTF-8, which only equals itself)
			return nil
		}
	}
	return nil
}

// walkOrder compares two paths as the walk lists them: name by name (pack.CompareUTF16, the agent's sort), a
// directory before what is below it.
func walkOrder(a, b string) int {
	if a == b {
		return 0
	}
	for {
		an, arest, amore := strings.Cut(a, "/")
		bn, brest, bmore := strings.Cut(b, "/")
		if c := pack.CompareUTF16(an, bn); c != 0 {
			return c
		}
		switch {
		case !amore && !bmore:
			return 0
		case !amore:
			return -1
		case !bmore:
			return 1
		}
		a, b = arest, brest
	}
}

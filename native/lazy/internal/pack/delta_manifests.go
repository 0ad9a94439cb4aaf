package pack

import (
	"fmt"

	json "github.com/goccy/go-json"
)

// deltaWriters are a delta's manifest files: manifest at opts.Manifest (the layer, or the whole tree's when no layer
// is asked), tree the whole tree's kept for the next delta (the same writer when there is no layer; nil when neither
// a layer's keep nor a whole manifest is asked).
type deltaWriters struct {
	manifest *manifestWriter
	layer    *manifestWriter
	tree     *manifestWriter
}

func newDeltaWriters(manifest string, d Delta) (*deltaWriters, error) {
	whole := `{"version":1,"entries":[`
	if d.LayerOver == "" {
		m, err := newJSONWriter(manifest, whole)
		return &deltaWriters{manifest: m, tree: m}, err
	}
	id, err := json.Marshal(d.LayerOver)
	if err != nil {
		return nil, err
	}
	layer, err := newJSONWriter(manifest, `{"version":2,"base":`+string(id)+`,"entries":[`)
	if err != nil {
		return nil, err
	}
	w := &deltaWriters{manifest: layer, layer: layer}
	if d.Keep != "" {
		if w.tree, err = newJSONWriter(d.Keep, whole); err != nil {
			layer.abandon()
			return nil, err
		}
	}
	return w, nil
}

func (w *deltaWriters) all() []*manifestWriter {
	var all []*manifestWriter
	for _, m := range []*manifestWriter{w.layer, w.tree} {
		if m != nil {
			all = append(all, m)
		}
	}
	return all
}

func (w *deltaWriters) abandon() {
	for _, m := range w.all() {
		m.abandon()
	}
}

// merge writes the tree after the delta, in walk order (delta.ts mergeDeltaManifest and deltaLayer): each archived
// entry as archived, the others as the base has them, each with this walk's lstat key; the layer takes the entries
// that differ from the base's. Answers the whole tree's totals.
func (w *deltaWriters) merge(walk []walked, base *baseManifest, c *classification, archived *archivedEntries) (Totals, error) {
	var totals Totals
	for i := range walk {
		at := c.baseOf[i]
		if e, ok := archived.byPath[walk[i].path]; ok {
			e.Stat = walk[i].stat()
			totals.count(e.Type, e.Link, e.Size)
			if err := w.add(&e, at < 0 || !sameEntry(&base.entries[at], &e)); err != nil {
				return totals, err
			}
			continue
		}
		if at < 0 {
			return totals, fmt.Errorf("internal: %s is new but was not archived", walk[i].path)
		}
		kept := &base.entries[at]
		moved := !walk[i].sameKey(kept.Stat)
		if moved {
			again := *kept
			key := walk[i].stat()
			again.Stat = &key
			kept = &again
		}
		totals.count(kept.Type, kept.Link, kept.Size)
		if err := w.add(kept, moved); err != nil {
			return totals, err
		}
	}
	return totals, nil
}

// add writes an entry of the tree to the whole manifest, and to the layer when it differs from the base's.
func (w *deltaWriters) add(e any, differs bool) error {
	if w.tree != nil {
		if err := w.tree.addValue(e); err != nil {
			return err
		}
	}
	if w.layer != nil && differs {
		return w.layer.addValue(e)
	}
	return nil
}

func (w *deltaWriters) finish(deleted []string, totals Totals, record *Record) error {
	if w.tree != nil {
		if err := w.tree.finishWith(struct {
			Totals    Totals  `json:"totals"`
			Selection *Record `json:"selection,omitempty"`
		}{totals, record}); err != nil {
			return err
		}
	}
	if w.layer == nil {
		return nil
	}
	if deleted == nil {
		deleted = []string{}
	}
	return w.layer.finishWith(struct {
		Removed   []string `json:"removed"`
		Opaque    []string `json:"opaque"`
		Totals    Totals   `json:"totals"`
		Selection *Record  `json:"selection,omitempty"`
	}{deleted, []string{}, totals, record})
}

// sameEntry: the archived entry e is the base's entry old, field for field (the agent's isDeepStrictEqual: an owner
// or key the base lacks makes them differ).
func sameEntry(old *baseEntry, e *Entry) bool {
	return old.Path == e.Path && old.Type == e.Type && old.Mode == e.Mode && old.Size == e.Size && old.Mtime == e.Mtime &&
		old.UID != nil && *old.UID == e.UID && old.GID != nil && *old.GID == e.GID &&
		old.Target == e.Target && old.Link == e.Link && old.Holes == e.Holes && old.Sha256 == e.Sha256 &&
		old.Stat != nil && *old.Stat == e.Stat
}

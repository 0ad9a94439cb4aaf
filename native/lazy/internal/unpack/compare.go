package unpack

// Difference is one way the archive differs from its manifest (protocol.ts Difference): the agent names the first
// ones in its verify_failed message, as for its own in-stream check (tar-manifest.ts).
type Difference struct {
	Path   string  `json:"path"`
	Kind   string  `json:"kind"`
	Fields []Field `json:"fields,omitempty"`
}

// Field is one compared field that differs; an absent value (the agent's undefined) is omitted.
type Field struct {
	Name     string `json:"name"`
	Expected any    `json:"expected,omitempty"`
	Actual   any    `json:"actual,omitempty"`
}

// Counts counts every difference, also those past the limit.
type Counts struct {
	Missing int `json:"missing"`
	Extra   int `json:"extra"`
	Changed int `json:"changed"`
}

// Got is what the archive says of an entry, in the manifest's terms (tar-manifest.ts onEntry).
type Got struct {
	Type   string
	Mode   int64
	Size   int64
	Mtime  int64
	Target string
	Sha256 string
	Link   string
}

// compare is tar-manifest.ts compareEntry: the content fields (type, mode, size, mtime but a symlink's, target,
// sha256, link), each absent value equal only to an absent one.
func compare(w *Want, g *Got) []Field {
	var out []Field
	str := func(name, want, got string) {
		if want != got {
			out = append(out, Field{Name: name, Expected: optional(want), Actual: optional(got)})
		}
	}
	num := func(name string, want *int64, got int64) {
		if *want != got {
			out = append(out, Field{Name: name, Expected: *want, Actual: got})
		}
	}
	str("type", w.Type, g.Type)
	num("mode", w.Mode, g.Mode)
	num("size", w.Size, g.Size)
	if w.Type != "symlink" {
		num("mtime", w.Mtime, g.Mtime)
	}
	str("target", w.Target, g.Target)
	str("sha256", w.Sha256, g.Sha256)
	str("link", w.Link, g.Link)
	return out
}

func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Differences collects them: all counted, the first `limit` kept (NewDifferences).
type Differences struct {
	limit  int
	list   []Difference
	counts Counts
}

func (d *Differences) Note(x Difference) {
	switch x.Kind {
	case "missing":
		d.counts.Missing++
	case "extra":
		d.counts.Extra++
	default:
		d.counts.Changed++
	}
	if len(d.list) < d.limit {
		d.list = append(d.list, x)
	}
}

func (d *Differences) Equal() bool { return d.counts.Missing+d.counts.Extra+d.counts.Changed == 0 }

// NewDifferences keeps the first limit differences and counts them all.
func NewDifferences(limit int) *Differences { return &Differences{limit: limit} }

// List is the differences kept, never nil.
func (d *Differences) List() []Difference {
	if d.list == nil {
		return []Difference{}
	}
	return d.list
}

// Counts counts every difference noted.
func (d *Differences) Counts() Counts { return d.counts }

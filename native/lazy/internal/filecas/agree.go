package filecas

import (
	"fmt"
	"strings"

	"snapflow/native/lazy/internal/unpack"
)

// Agree checks, before anything is made, that an index says of every entry what the snapshot's manifest says: the
// same paths, and for each its type, mode, size, mtime (not a symlink's), target, hard-link name, owners and
// content SHA-256. The restore then checks every file it writes against its index entry, so a tree it makes is the
// manifest's, content included, without a second pass that hashes every file (the first restore of a snapshot
// outside its source sandbox would otherwise make one: a source could upload an honest index beside a manifest that
// lies, or the reverse). Differences fail the restore (verify_failed), the first few named.
func Agree(x *Index, m *unpack.Expected) error {
	var diffs []string
	seen := 0
	note := func(s string) {
		if len(diffs) < 5 {
			diffs = append(diffs, s)
		}
	}
	for i := range x.Entries {
		e := &x.Entries[i]
		w := m.Lookup(e.Path)
		if w == nil {
			note(fmt.Sprintf("%q is in the index, not in the manifest", e.Path))
			continue
		}
		seen++
		var fields []string
		num := func(name string, want *int64, got int64) {
			if want == nil || *want != got {
				fields = append(fields, name)
			}
		}
		if w.Type != e.Type {
			fields = append(fields, "type")
		}
		num("mode", w.Mode, int64(e.Mode))
		num("size", w.Size, e.Size)
		if e.Type != "symlink" {
			num("mtime", w.Mtime, e.Mtime)
		}
		if w.UID != nil {
			num("uid", w.UID, int64(e.UID))
		}
		if w.GID != nil {
			num("gid", w.GID, int64(e.GID))
		}
		if w.Target != e.Target {
			fields = append(fields, "target")
		}
		if w.Link != e.Link {
			fields = append(fields, "link")
		}
		if w.Sha256 != e.Sha256 {
			fields = append(fields, "sha256")
		}
		if w.Holes != e.Holes {
			fields = append(fields, "holes")
		}
		if len(fields) > 0 {
			note(fmt.Sprintf("%q differs in %s", e.Path, strings.Join(fields, ", ")))
		}
	}
	if seen != len(m.Entries) {
		note(fmt.Sprintf("the manifest has %d entries the index lacks", len(m.Entries)-seen))
	}
	if len(diffs) == 0 {
		return nil
	}
	return &Error{Code: "verify_failed", Field: "manifest", Message: "the index does not agree with the snapshot's manifest: " + strings.Join(diffs, "; ")}
}

package filecas

import "snapflow/native/lazy/internal/pack"

// WriteManifest writes the tree's manifest from the index to final: what files-pack wrote beside it, byte for byte,
// given the same selection record (a file-level snapshot stores no manifest of its own: every manifest entry is in
// its index, and the record keeps the manifest's SHA-256 for the reader to check what this makes).
func (x *Index) WriteManifest(final string, record *pack.Record) (pack.Summary, error) {
	f, err := pack.NewManifestFile(final)
	if err != nil {
		return pack.Summary{}, err
	}
	for i := range x.Entries {
		if err := f.Add(&x.Entries[i].Entry); err != nil {
			f.Abandon()
			return pack.Summary{}, err
		}
	}
	s, err := f.Finish(record)
	if err != nil {
		f.Abandon()
	}
	return s, err
}

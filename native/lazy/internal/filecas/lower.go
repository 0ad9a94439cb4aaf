package filecas

// An overlay over a base's own tree (the compaction of a file-level chain, issue 24). A compactor wakes a chain as
// files-mount serving the base's index read-only, with each overlay delta extracted into a directory of its own
// laid over it, and backs the merged tree up with that index as its base. A name that none of the layer
// directories holds (no file, no directory, no whiteout) is served by the lowest layer alone, which is the base's
// index itself: its content is the base's chunk list, and the file need not be read — though its inode, device and
// ctime are the mount's, not the ones the index keeps, so restic's rule would read all of it. Such a file is taken
// from the base when what lstat shows (type, mode, size, mtime, owners) agrees with the base's entry; every name a
// layer touched is read as any changed file is.
//
// A directory no layer holds is not walked below at all: a layer holding any name beneath it would hold the
// directory too (a layer is a directory tree on disk), so everything below it is the lowest layer's, which is the
// base's index — its entries are taken as they are, stat keys included (grafted). That is what makes a compaction
// cost what the chain changed: in the npm workspace a walk of the whole merged tree (31.7k lstats through overlayfs
// and FUSE) took 1.52 s of the engine's 1.83 s.
//
// The layers are the caller's (a compactor's own extraction): a layer list that leaves out a changed name makes at
// worst this snapshot wrong, which the compaction's check of the tree against the delta's manifest then refuses.
// So does a hard link between a grafted name and a walked one (the walk cannot know the grafted name's inode): the
// walked name is read as a file of its own, and the check finds its link missing.

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
	"snapflow/native/lazy/internal/pack"
)

// maxLayerNames bounds what the layer directories may hold (a chain is at most 32 deltas of a sleep's changes).
const maxLayerNames = 4 << 20

// layerNames lists every name beneath each layer directory, as paths relative to it: files, directories,
// symlinks and whiteouts alike. Each directory is opened from its parent by descriptor without following a symlink.
func layerNames(dirs []string) (map[string]struct{}, error) {
	names := map[string]struct{}{}
	for _, dir := range dirs {
		root, err := beneath.OpenRoot(dir)
		if err != nil {
			return nil, unusable(fmt.Sprintf("layer %s cannot be opened: %v", dir, err))
		}
		err = listBeneath(root, "", names)
		unix.Close(root)
		if err != nil {
			return nil, unusable(fmt.Sprintf("layer %s cannot be listed: %v", dir, err))
		}
	}
	return names, nil
}

func listBeneath(dir int, rel string, names map[string]struct{}) error {
	list, err := beneath.Names(dir)
	if err != nil {
		return err
	}
	for _, name := range list {
		path := name
		if rel != "" {
			path = rel + "/" + name
		}
		if len(names) >= maxLayerNames {
			return fmt.Errorf("more than %d names", maxLayerNames)
		}
		names[path] = struct{}{}
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := beneath.OpenDirBeneath(dir, name)
		if err != nil {
			return err
		}
		err = listBeneath(sub, path, names)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// fromLower: the walked file is a name no layer touched, and lstat shows what the base's entry says.
func fromLower(layered map[string]struct{}, w *pack.Walked, old *Entry) bool {
	if layered == nil {
		return false
	}
	if _, touched := layered[w.Path()]; touched {
		return false
	}
	return pack.SameAsEntry(w, &old.Entry)
}

func touched(layered map[string]struct{}, path string) bool {
	_, ok := layered[path]
	return ok
}

// descendInto is the walk's rule over layers: below a directory only when a layer holds it (nil: no layers, walk all).
func descendInto(layered map[string]struct{}) func(string) bool {
	if layered == nil {
		return nil
	}
	return func(rel string) bool { return touched(layered, rel) }
}

// graft emits the base's entries below dir, a directory no layer touched (the walk did not go below it): they follow
// dir's own entry in the base, which is in walk order. old is the base's entry for dir. A layer (lay) holds those
// that differ from the index it lies over: none, over the base; over a rebase, what the layers between changed.
func (r *reader) graft(prior []Entry, at *int, old *Entry, dir string, emit *emitter, lay *layering) (Counts, error) {
	var took Counts
	if old == nil || old.Type != "dir" {
		return took, unusable(fmt.Sprintf("%s is a directory no layer holds, so the base's, but the base has no directory there", dir))
	}
	prefix := dir + "/"
	for ; *at < len(prior) && strings.HasPrefix(prior[*at].Path, prefix); *at++ {
		o := &prior[*at]
		e := Entry{Entry: o.Entry, Data: o.Data, Node: o.Node}
		if len(o.Chunks) > 0 {
			e.Chunks = make([]int, len(o.Chunks))
			for k, c := range o.Chunks {
				e.Chunks[k] = r.table.refBase(c)
			}
		}
		if o.Type == "file" && o.Link == "" {
			took.Files++
			took.Bytes += o.Size
		}
		emit.add(e, lay == nil || lay.inLayer(&e))
	}
	return took, nil
}

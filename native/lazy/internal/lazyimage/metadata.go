package lazyimage

import (
	"context"

	"snapflow/native/lazy/internal/index"
)

// queueTables queues the image's first chunk and, when it is a squashfs image, the chunks holding its tables first for
// the prefetcher: all of them at once, before the kernel asks, instead of one on-demand fetch after another as the
// mount and the first lookups reach them. The first chunk goes first, then the last chunks (the mount reads the id,
// fragment and export tables at the end before the inode table). An index made since `tables` was recorded names
// them, so every worker starts at once; for an older one the first chunk is fetched alone and its superblock read.
// Any other image is prefetched in the usual order.
func (img *Image) queueTables(ctx context.Context) {
	tables, ok := img.tables(ctx)
	if !ok {
		return
	}
	lo, hi, ok := img.idx.Span(tables.From, tables.To-tables.From)
	if !ok {
		return
	}
	img.mu.Lock()
	defer img.mu.Unlock()
	for i := lo; i <= hi; i++ { // a stack: the highest offset is taken first
		if d := img.of[i]; !img.st[d].Local {
			img.hints = append(img.hints, d)
		}
	}
	if d := img.of[0]; !img.st[d].Local {
		img.hints = append(img.hints, d) // on top: the superblock before anything
	}
}

// tables is where the image keeps its squashfs tables: as its index says, else as its superblock says (the first
// chunk made local to read it).
func (img *Image) tables(ctx context.Context) (index.Range, bool) {
	if t := img.idx.Tables; t != nil {
		return *t, true
	}
	first := img.idx.Chunks[0]
	if first.Size < 96 || img.ensure(ctx, img.of[0], Ahead) != nil {
		return index.Range{}, false
	}
	sb := make([]byte, 96)
	if img.cache.ReadAt(first.SHA256, sb, 0) != nil {
		return index.Range{}, false
	}
	return index.SquashfsTables(sb, img.idx.Size)
}

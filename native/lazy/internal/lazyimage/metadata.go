package lazyimage

import (
	"context"

	"snapflow/native/lazy/internal/index"
)

// queueTables makes the image's first chunk local and, when it is a squashfs image, queues the chunks holding its
// tables first for the prefetcher: all of them at once, before the kernel asks, instead of one on-demand fetch after
// another as the mount and the first lookups reach them. The last chunks go first (the mount reads the id, fragment
// and export tables at the end before the inode table). Any other image is prefetched in the usual order.
func (img *Image) queueTables(ctx context.Context) {
	first := img.idx.Chunks[0]
	if first.Size < 96 || img.ensure(ctx, img.of[0], Ahead) != nil {
		return
	}
	sb := make([]byte, 96)
	if img.cache.ReadAt(first.SHA256, sb, 0) != nil {
		return
	}
	tables, ok := index.SquashfsTables(sb, img.idx.Size)
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
		if d := img.of[i]; !img.st[d].local {
			img.hints = append(img.hints, d)
		}
	}
}

package lazyimage

import (
	"context"
	"encoding/binary"
)

// squashfsMagic is "hsqs", the first four bytes of a squashfs image (little-endian).
const squashfsMagic = 0x73717368

// squashfsTables answers where a squashfs image keeps its tables: mksquashfs writes the inode, directory, fragment,
// export and id tables together after the data, from inode_table_start (superblock offset 64) to bytes_used (40).
// The kernel's mount and a walk's first lookups read nothing else but the superblock.
func squashfsTables(sb []byte, size int64) (from, to int64, ok bool) {
	if len(sb) < 96 || binary.LittleEndian.Uint32(sb) != squashfsMagic {
		return 0, 0, false
	}
	used := int64(binary.LittleEndian.Uint64(sb[40:]))
	start := int64(binary.LittleEndian.Uint64(sb[64:]))
	if start < 96 || used <= start || used > size {
		return 0, 0, false
	}
	return start, used, true
}

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
	from, to, ok := squashfsTables(sb, img.idx.Size)
	if !ok {
		return
	}
	lo, hi, ok := img.idx.Span(from, to-from)
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

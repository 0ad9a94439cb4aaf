package pack

import (
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// region is a run of a sparse file's data: [offset, offset+length). Whatever no region covers reads back as zeros.
type region struct{ offset, length int64 }

// looksSparse is GNU tar's test (ST_IS_SPARSE): fewer 512-byte blocks allocated than the size needs.
func looksSparse(st *unix.Stat_t) bool {
	need := st.Size / 512
	if st.Size%512 != 0 {
		need++
	}
	return st.Blocks < need
}

// dataRegions maps a file's data as GNU tar's seek scan does (sparse.c sparse_scan_file_seek): SEEK_DATA/SEEK_HOLE
// from the start, and an empty region at the size when the file ends in a hole. ok is false when the filesystem
// reports the whole file as one run of data (it does not know holes, or the file has none): then it is archived
// dense. GNU tar then scans for zero blocks instead; here a file is sparse only where the filesystem says so.
func dataRegions(fd int, size int64) (regions []region, ok bool, err error) {
	var offset int64
	for {
		data, err := unix.Seek(fd, offset, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			// The rest is a hole: GNU tar ends the map with an empty region at the size.
			return append(regions, region{size, 0}), true, nil
		}
		if err != nil {
			return nil, false, err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, false, err
		}
		if offset == 0 && data == 0 && hole >= size {
			return nil, false, nil
		}
		if hole > size {
			hole = size // grown since the walk: the check after reading fails it
		}
		regions = append(regions, region{data, hole - data})
		if hole >= size {
			return regions, true, nil
		}
		offset = hole
	}
}

// sparseMap is the body's head in GNU's PAX 1.0 format: the count, then each offset and length, in decimal lines,
// zero-padded to a 512-byte block (tar-sparse.ts reads it back).
func sparseMap(regions []region) []byte {
	b := strconv.AppendInt(nil, int64(len(regions)), 10)
	b = append(b, '\n')
	for _, r := range regions {
		b = strconv.AppendInt(b, r.offset, 10)
		b = append(b, '\n')
		b = strconv.AppendInt(b, r.length, 10)
		b = append(b, '\n')
	}
	if pad := len(b) % blockSize; pad != 0 {
		b = append(b, make([]byte, blockSize-pad)...)
	}
	return b
}

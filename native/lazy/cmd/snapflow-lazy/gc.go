package main

import (
	"os"
	rdebug "runtime/debug"
)

// incrementalHeap: an incremental (files-pack over a base, pack with a delta) collects only once its heap nears
// this. Most of what it allocates is its base — the index decoded, or the kept manifest parsed — held for the whole
// pass (~50 MB for the npm workspace's 31.7k entries); collecting as the heap doubled from 4 MB marked it again and
// again. The npm workspace after no change, to a file, alternated: files-pack 0.19-0.21 -> 0.17-0.18 s wall and
// 0.29-0.34 -> 0.23-0.26 CPU-s (peak RSS 76-83 -> 102 MB); pack's delta 0.17-0.18 -> 0.14-0.15 s and 0.27-0.29 ->
// 0.20-0.22 CPU-s (53-63 -> 87 MB). A full backup keeps the default: what it holds grows with the tree.
const incrementalHeap = 256 << 20

// collectOnlyNear turns the collector's proportional pacing off and bounds the heap instead (GOGC=off with a
// GOMEMLIMIT, as the Go GC guide describes); a GOGC or GOMEMLIMIT the environment sets wins.
func collectOnlyNear(limit int64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	rdebug.SetMemoryLimit(limit)
	rdebug.SetGCPercent(-1)
}

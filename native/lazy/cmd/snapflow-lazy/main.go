// Command snapflow-lazy is the sandbox-side helper for snapflow's chunked snapshots: it cuts an image into
// content-addressed chunks, uploads the ones the store lacks, and mounts an image before it is downloaded.
//
// The format: an image (squashfs/erofs, already compressed) is cut by FastCDC into chunks of ~512 KiB average (min
// avg/4, max avg*4); each chunk is stored as chunks/<sha256 of its bytes>, and the snapshot is a JSON index listing the
// chunks in order with offsets and sizes plus the whole image's SHA-256. The same bytes give the same chunks, so a
// second snapshot of a slightly changed tree shares most chunks with the first and uploads only the others.
//
// The lazy restore, per read of MOUNTPOINT/image at [off, off+n):
//
//	for each chunk under the range:
//	    local (a file in CACHE/chunks named by its digest)?  → use it
//	    someone already fetching it?                         → wait for that fetch
//	    else GET its presigned URL (deadline per attempt; retry with backoff; on 403 re-read the URL file),
//	         hash the body, compare with the name            → mismatch or exhausted retries: EIO, chunk reported
//	         write CACHE/chunks/<digest>.tmp, rename into place
//	copy the bytes out of the cached chunks
//
// Meanwhile the prefetcher walks the chunks not yet local — first the ones following each on-demand chunk (latest read
// first), then the rest in image order — with N parallel fetches, in up to 3 passes so failed chunks are retried.
// When every chunk is local, reads stop touching the network and status.json gets completeMs. The store's credentials
// never reach this process: it only sees presigned per-chunk URLs, read from a file the agent can rewrite.
//
// Subcommands: chunk (index an image), upload (PUT chunks), mount (serve the image lazily), verify (check chunks).
// Two more serve every restore, lazy or not, because Node has no openat2: merge (move an extracted layer into its
// target) and remove (apply a delta's deletions), both by directory descriptors that never follow a symlink
// (internal/beneath); opaque, the same way, marks a restored overlay upper's opaque directories; sanitize, relink and
// setid clean an extracted tree, make an image's hard links one file again and give set-id bits back, the same way.
// pack is the backup engine (internal/pack): a tree's tar.zst archive and its manifest from one read of each file,
// written to stdout or PUT in parts to presigned URLs (internal/partupload); size bounds that archive beforehand;
// unpack is its reverse for the default restore (internal/unpack): tar.zst → a tree checked against its manifest.
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  snapflow-lazy chunk  --image FILE [--avg 512KiB]                 index JSON to stdout
  snapflow-lazy upload --image FILE --urls FILE.json [--index FILE] [--concurrency 8] [--retries 4]
  snapflow-lazy mount  --index FILE --urls FILE.json --cache DIR --mountpoint DIR [--prefetch 32] [--status FILE]
  snapflow-lazy files-mount --index FILE --urls FILE.json --cache DIR --mountpoint DIR [--prefetch 16] [--status FILE]
                                                                 a file-level index's tree, read-only; {"ready":true,…} to stdout
  snapflow-lazy verify --index FILE (--cache DIR | --image FILE)
  snapflow-lazy merge  --staging DIR --target DIR --extracted-at MS [--keep-owners]   {"moved"} to stdout
  snapflow-lazy remove --root DIR  < NUL-separated relative entries                  {"removed","skipped"} to stdout
  snapflow-lazy opaque --root DIR  < NUL-separated relative directories              {"marked"} to stdout
  snapflow-lazy relink --root DIR  < JSON [["first","other",…],…]                    {"relinked"} to stdout
  snapflow-lazy setid  --root DIR  < JSON [{"path","mode"},…]                        {"set","skipped"} to stdout
  snapflow-lazy sanitize --root DIR [--keep-owners]                                 {"devicesRemoved","setidCleared","ownersReset"}
  snapflow-lazy pack   --root DIR --manifest FILE [--out FILE] [--result-fd N] < JSON {level,threads,long,selection,delta}
                                                                 tar.zst to stdout, result JSON to fd N
  snapflow-lazy unpack --root DIR [--result-fd N] < JSON line {url?,manifest,keepOwners,complete,…} [+ tar.zst]
                                                                 the tree beneath DIR, result JSON to fd N
  snapflow-lazy pack   … --part-size N [--concurrency 4] [--retries 2] < JSON {…,urls}
                                                                 the archive PUT in parts to the urls; result JSON with its parts
  snapflow-lazy files-pack --root DIR --manifest FILE --index FILE (--part-size N [--concurrency 4] [--retries 2] | --out FILE)
                       [--result-fd N] < JSON {name,avgChunk,level,selection,base:{file,url,sha256},urls}
                                                                 file-level backup: new chunks packed, the index; result JSON to fd N
  snapflow-lazy get    --out FILE [--result-fd N] < JSON line {url,idleSeconds,retries}
                                                                 one presigned GET to FILE (whole or not at all), {"bytes","sha256"}
  snapflow-lazy size   --root DIR                                 {"entries","bytes","tarMax","ms"}: a tar archive's upper bound
  snapflow-lazy version                                                           release, Go and commit, one line
  snapflow-lazy files-unpack --root DIR [--result-fd N] < JSON line {index:{file}|{url,sha256},packs,keepOwners,walk,…}
                                                                 a file-level index's tree beneath DIR, result JSON to fd N
  snapflow-lazy files-manifest --out FILE [--result-fd N] < JSON line {index:{file}|{url,sha256},selection,…}
                                                                 the snapshot's manifest, made from its index, to FILE
  snapflow-lazy files-check --root DIR [--result-fd N] < JSON line {index:{url,sha256,chain},layerOnly,…}
                                                                 each file the index (or its own layer) names hashed
                                                                 beneath DIR: {"equal","files","differences",…}
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	commands := map[string]func([]string) error{
		"chunk":       chunkCmd,
		"upload":      uploadCmd,
		"mount":       mountCmd,
		"verify":      verifyCmd,
		"files-check": filesCheckCmd,
		"merge":       mergeCmd,
		"remove":      removeCmd,
		"opaque":      opaqueCmd,
		"relink":      relinkCmd,
		"setid":       setidCmd,
		"sanitize":    sanitizeCmd,
		"pack":        packCmd,
		"unpack":      unpackCmd,
		"size":        sizeCmd,
		"get":         getCmd,
		"version":     versionCmd,
		// the file-level format (issue 24)
		"files-pack":     filesPackCmd,
		"files-unpack":   filesUnpackCmd,
		"files-mount":    filesMountCmd,
		"files-manifest": filesManifestCmd,
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "snapflow-lazy %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

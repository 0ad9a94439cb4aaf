// The agent's HTTP protocol: every JSON body and query that crosses into the agent, as zod schemas. The Worker
// imports the same schemas, so the two sides cannot drift apart.
//
//   GET    /v1/health                      liveness, no token
//   GET    /v1/probe                       what this sandbox can do (tools, filesystems, fuse, caps, cpu, memory, disk)
//   POST   /v1/drop-caches                 sync and drop the page cache when permitted → {dropped, ms, reason?}
//   POST   /v1/datasets     DatasetBody    generate a deterministic dataset at `path`
//   POST   /v1/manifest     PathBody       manifest of a tree (less a backup's selection: SELECTION_HEADER)
//   POST   /v1/selection    SelectionBody  a selection's rules compiled for a tree, and its warnings
//   POST   /v1/verify       VerifyBody     compare a tree with an expected manifest (walks and hashes everything)
//   POST   /v1/verify-tree  VerifyTreeBody compare a tree with a manifest file/URL by metadata (lstat walk); deep:
//                                          true hashes every file too (a mount whose image nobody hashed) → TreeCheck
//   POST   /v1/delta        DeltaBody      changed entries since a base manifest → list file; deleted paths
//   POST   /v1/overlay-layer OverlayLayerBody  an overlay delta's layer manifest (version 2) from its upper
//                                          directory, written to a file → OverlayLayerResult
//   POST   /v1/remove       RemoveBody     remove relative entries below a tree (applying a delta's deletions)
//   GET    /v1/archive?     ArchiveQuery   the tree as an archive, streamed as the response body
//   POST   /v1/archive      ArchiveToFile  the tree as an archive written to a file in the sandbox
//          With manifestOut (both): single pass — the manifest is made from the tar stream as it is archived and
//          written to manifestOut; with base, only what changed by metadata is archived (a delta). POST answers
//          SinglePassResult; GET writes it to resultOut (if given) before the stream ends.
//   GET    /v1/stat?path=                  {exists, type, size, entries}
//   GET    /v1/space?path=                 free and total bytes of the filesystem holding path (or its deepest ancestor), its device
//   GET    /v1/files?path=                 a file's raw bytes (Content-Length set); &encoding=base64 (JSON) or
//                                          base64-sse (events) reproduce the SDK file API for the baselines
//   POST   /v1/split        SplitBody      cut a file into chunk files (the chunked baseline)
//   PUT    /v1/files?path=                 request body → file
//   DELETE /v1/files?path=                 remove a file or tree
//   PUT    /v1/extract?     ExtractQuery   request body (an archive) piped into the extractor
//   POST   /v1/extract      ExtractFile    extract an archive file in the sandbox
//          With an expected manifest (here, and in /v1/download and /v1/download-ranged extract): each entry is
//          checked as it streams into tar, then a metadata walk → {…, verified, equal}; a mismatch is 422 verify_failed.
//   POST   /v1/hash-url     HashUrlBody    GET a presigned URL to the end and hash it (verifies a stored archive)
//   POST   /v1/upload       UploadBody     PUT a file in the sandbox to a presigned URL
//   POST   /v1/download     DownloadBody   GET a presigned URL into a file, or piped into the extractor
//   POST   /v1/swap/plan    SwapBody       a restore's swap: where its new tree is built beside the target (journal)
//   POST   /v1/swap/in      SwapInBody     the verified new tree to the target, the old one kept beside it (or an
//                                          empty directory, and the mount it asks for made there at once)
//   POST   /v1/swap/commit  SwapBody       the restore is recorded: remove the old tree
//   POST   /v1/swap/rollback SwapBody      put the target back exactly as it was, remove the new tree
//   GET    /v1/swap?        SwapBody       a swap's journal ({state: "none"} when there is none)
//   POST   /v1/sweep        SweepBody      roll back swaps and remove staging files and images older than a bound
//   POST   /v1/faults       FaultBody      test-only, when the agent runs with SNAPFLOW_AGENT_FAULTS=1
//   DELETE /v1/sandbox                     host agent only: drop this sandbox's root directory
//
// Every request, health included (readiness is authenticated), carries `authorization: Bearer <token>`: this
// sandbox's own token (agent-token.ts); a host agent serving many sandboxes also needs `x-snapflow-sandbox: <id>`.
//
// Errors answer {error: {code, message, field?}} (agent-error.ts): bad_request and path_outside_root 400,
// unauthorized 401, not_found 404, verify_failed 422 (a restore differs from its manifest), store_refused 422 (the
// store refused the bytes for good: BadDigest, PreconditionFailed), tool_failed 500 (a tool exited non-zero, or
// the store or pipe around it failed), internal_error 500 (an exception nothing classified: a bug in the agent),
// unavailable 501 (a tool or kernel feature is missing here), url_expired 502 (a presigned URL expired before it
// was used: fresh URLs would work), injected_fault 503 (test-only), no_space 507 (the disk filled: permanent).
//
// The schemas live in protocol/, one file per concern (the route modules in container/routes/ import them through
// this index); this file only re-exports them, so that both sides keep one import.
export * from "./protocol/sandbox.ts";
export * from "./protocol/formats.ts";
export * from "./protocol/files.ts";
export * from "./protocol/manifest.ts";
export * from "./protocol/trees.ts";
export * from "./protocol/archive.ts";
export * from "./protocol/transfer.ts";
export * from "./protocol/images.ts";
export * from "./protocol/chunks.ts";
export * from "./protocol/filecas-mount.ts";
export * from "./protocol/swaps.ts";
export * from "./protocol/admin.ts";
export * from "./protocol/answers.ts";
export * from "./protocol/probe.ts";
export * from "./protocol/filecas-unpack.ts";
export * from "./protocol/filecas-check.ts";
export * from "./protocol/filecas-pack.ts";

// Typed calls to the agent over a SandboxTransport. Agent errors arrive as {error:{code,message,field}} and become
// AgentCallError, which keeps the HTTP status so callers can tell a permanent 4xx from a retryable 5xx. Every call
// has a deadline fitted to it (agent-deadlines.ts: short, streamed or long); one that is hit is AgentCallError
// `agent_timeout` (504, transient), and a connection that fails is `agent_unreachable` (502, transient), both
// naming the call and the sandbox. Every answer is parsed against its schema (container/contract/agent-answers.ts) before
// the caller sees it: the agent runs in a sandbox whose code nobody reviewed.
import { z } from "zod";
import * as A from "../../container/contract/agent-answers.ts";
import { AGENT_ERROR_STATUS, type AgentErrorCode } from "../../container/contract/agent-error-codes.ts";
import type { Manifest } from "../../container/contract/protocol.ts";
import type * as P from "../../container/contract/protocol.ts";
import { FilesCheckResult, FilesPackResult, FilesUnpackResult, SELECTION_HEADER, TreeSizeResult, UploadMultipartResult } from "../../container/contract/protocol.ts";
import { deadlineFor, DEFAULT_AGENT_DEADLINES, type AgentDeadlines, type CallKind } from "./agent-deadlines.ts";
import { fetchWithDeadline } from "./deadline-fetch.ts";
import type { SandboxTransport } from "./transport.ts";

/**
 * What a call to the agent failed with: one of the agent's own codes (container/contract/agent-error-codes.ts), or
 * one the Worker's side of the call gives: `agent_timeout` (a deadline hit, 504), `agent_unreachable` (the
 * connection failed, 502), `bad_answer` (an answer that did not parse against its schema, permanent), `http_error`
 * (something other than the agent answered, e.g. the container platform).
 */
export type AgentCallCode = AgentErrorCode | "agent_timeout" | "agent_unreachable" | "bad_answer" | "http_error";

const AGENT_CODES = new Set<string>(Object.keys(AGENT_ERROR_STATUS));

export class AgentCallError extends Error {
  readonly status: number;
  readonly code: AgentCallCode;
  readonly field: string | undefined;
  constructor(what: string, status: number, code: AgentCallCode, message: string, field?: string) {
    super(`${what}: ${message}`);
    this.status = status;
    this.code = code;
    this.field = field;
  }
  get permanent(): boolean {
    // 507: the sandbox's disk is full (container/http/agent-error.ts no_space); retrying the same write fills it again.
    // bad_answer: the answer did not parse against its schema; an agent that lies once is not asked again.
    return (this.status >= 400 && this.status < 500) || this.status === 507 || this.code === "bad_answer";
  }
}

export interface VerifyResult {
  equal: boolean;
  counts: { missing: number; extra: number; changed: number };
  differences: { path: string; kind: string; fields?: { name: string; expected: unknown; actual: unknown }[] }[];
  totals: Manifest["totals"];
  ms: number;
}

/** What the agent reports of a single-pass archive (container/archive/archive.ts): archive and manifest from one read. */
export interface SinglePassResult {
  bytes: number;
  sha256: string;
  ms: number;
  /** `sha256`: of the manifest file; `layerOf`: it is a layer over that snapshot's manifest (a tar delta's) */
  manifest: { totals: { files: number; dirs: number; symlinks: number; bytes: number }; entries: number; jsonBytes: number; walkMs: number; sha256?: string; layerOf?: string; treeSha256?: string };
  delta?: { changed: number; changedBytes: number; deleted: string[]; suspects: number; suspectBytes: number; planMs: number; baseFrom?: "kept" | "store" };
}

/** What the agent writes to a streamed archive's result file when the archive fails (container/archive/archive.ts). */
interface RecordedFailure {
  error?: { code?: string; message?: string; field?: string };
  status?: number;
}
function recordedFailure(what: string, answer: RecordedFailure): AgentCallError | undefined {
  const e = answer.error;
  if (!e?.code || !e.message) return undefined;
  // A code outside the agent's registry is not ours to branch on.
  const code = AGENT_CODES.has(e.code) ? (e.code as AgentErrorCode) : "http_error";
  return new AgentCallError(what, answer.status ?? 500, code, e.message, e.field);
}

type Query = Record<string, string | number | boolean | undefined>;

function qs(q: Query): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) u.set(k, String(v));
  return u.toString();
}

export class AgentClient {
  private readonly transport: SandboxTransport;
  readonly sandboxId: string;
  private selectionHeader: string | undefined;
  readonly deadlines: AgentDeadlines;
  constructor(transport: SandboxTransport, sandboxId: string, deadlines: AgentDeadlines = transport.deadlines ?? DEFAULT_AGENT_DEADLINES) {
    this.transport = transport;
    this.sandboxId = sandboxId;
    this.deadlines = deadlines;
  }

  /**
   * From here on this client's requests carry a backup's selection (protocol.ts SELECTION_HEADER), so that every
   * walk of the tree it asks for (manifest, archive, image, delta) leaves out the same entries.
   */
  withSelection(spec: P.SelectionSpec | undefined): this {
    this.selectionHeader = spec ? encodeURIComponent(JSON.stringify(spec)) : undefined;
    return this;
  }

  /** The selection's rules as the agent compiled them for `path`, with its warnings (git missing, say). */
  checkSelection(path: string, selection: P.SelectionSpec) {
    return this.json(A.SelectionRecord, "check selection", "/v1/selection", { path, selection }, "POST", "short");
  }

  /**
   * A raw call under the deadline of its kind: the response when it is 2xx (its body still under the deadline
   * until read to the end or cancelled), AgentCallError otherwise.
   */
  async call(what: string, path: string, init: RequestInit = {}, kind: CallKind = "stream"): Promise<Response> {
    const deadline = deadlineFor(kind, this.deadlines);
    const sandbox = this.sandboxId;
    const r = await fetchWithDeadline(
      (withSignal) => this.transport.agentFetch(sandbox, path, withSignal),
      this.selectionHeader ? { ...init, headers: { ...Object.fromEntries(new Headers(init.headers)), [SELECTION_HEADER]: this.selectionHeader } } : init,
      deadline,
      {
        timeout: (how, ms) => new AgentCallError(what, 504, "agent_timeout", {
          silence: `the agent in sandbox ${sandbox} sent or took nothing for ${ms / 1000} s (AGENT_IDLE_SECONDS); aborted`,
          sized: `the agent in sandbox ${sandbox} did not send its answer within ${ms / 1000} s (AGENT_IDLE_SECONDS + its size at 1 MB/s); aborted`,
          total: `the agent in sandbox ${sandbox} did not finish within ${ms / 1000} s (${deadline.totalVar}); aborted`,
        }[how]),
        broken: (during, cause) => new AgentCallError(what, 502, "agent_unreachable",
          `the connection to the agent in sandbox ${sandbox} failed ${during === "request" ? "before its answer" : "while it was answering"}: ${cause instanceof Error ? cause.message : String(cause)}`),
      },
    );
    if (r.ok) return r;
    const text = await r.text();
    let body: { error?: { code?: string; message?: string; field?: string } } = {};
    try {
      body = JSON.parse(text);
    } catch {
      // not our agent's JSON (a proxy or the container platform answered)
    }
    const code = body.error?.code !== undefined && AGENT_CODES.has(body.error.code) ? (body.error.code as AgentErrorCode) : "http_error";
    throw new AgentCallError(what, r.status, code, body.error?.message ?? (text.slice(0, 500) || `HTTP ${r.status}`), body.error?.field);
  }

  /**
   * A JSON call: the whole answer under the call's deadline (long unless said otherwise), parsed against `schema`
   * (container/contract/agent-answers.ts) before anyone acts on it. An answer that does not parse is AgentCallError
   * `bad_answer` naming the field: the agent is not ours, or not telling the truth.
   */
  async json<S extends z.ZodType>(schema: S, what: string, path: string, body?: unknown, method = "POST", kind: CallKind = { long: {} }): Promise<z.output<S>> {
    const init: RequestInit = body === undefined ? { method } : { method, body: JSON.stringify(body), headers: { "content-type": "application/json" } };
    return this.parsed(schema, what, await (await this.call(what, path, init, kind)).json());
  }

  private parsed<S extends z.ZodType>(schema: S, what: string, answer: unknown): z.output<S> {
    const got = schema.safeParse(answer);
    if (got.success) return got.data;
    const issue = got.error.issues[0]!;
    throw new AgentCallError(what, 502, "bad_answer", `the agent in sandbox ${this.sandboxId} answered a malformed result: ${issue.path.join(".") || "(the answer)"}: ${issue.message}`);
  }

  probe() {
    return this.json(A.ProbeAnswer, "probe", "/v1/probe", undefined, "GET", "short");
  }
  dropCaches() {
    return this.json(z.looseObject({ dropped: z.boolean(), ms: z.number(), reason: z.string().optional() }), "drop caches", "/v1/drop-caches", {}, "POST", "short");
  }
  generateDataset(body: z.input<typeof P.DatasetBody>) {
    return this.json(z.looseObject({ files: z.number(), bytes: z.number(), ms: z.number() }), "generate dataset", "/v1/datasets", body);
  }
  /** The manifest as a response, so the caller can stream it to the store. */
  manifest(path: string) {
    return this.call("manifest", "/v1/manifest", { method: "POST", body: JSON.stringify({ path }) });
  }
  /** Sends the expected manifest as a stream (it can be megabytes) and gets the comparison. */
  async verify(path: string, expected: ReadableStream<Uint8Array>) {
    const head = new TextEncoder().encode(`{"path":${JSON.stringify(path)},"expected":`);
    const tail = new TextEncoder().encode("}");
    const body = concatStreams([head, expected, tail]);
    return this.parsed(A.VerifyAnswer, "verify", await (await this.call("verify", "/v1/verify", { method: "POST", body, headers: { "content-type": "application/json" } })).json());
  }
  /** Compares a tree with a manifest the agent fetches itself: metadata only, or every file hashed (deep). */
  verifyTree(body: z.input<typeof P.VerifyTreeBody>) {
    return this.json(A.VerifyTreeAnswer, "verify tree", "/v1/verify-tree", body);
  }
  archiveStream(q: z.input<typeof P.ArchiveQuery>) {
    return this.call("archive", `/v1/archive?${qs(q as Query)}`);
  }
  archiveToFile(body: z.input<typeof P.ArchiveToFile> & { manifestOut: string }): Promise<SinglePassResult>;
  archiveToFile(body: z.input<typeof P.ArchiveToFile>): Promise<P.WrittenBytes>;
  archiveToFile(body: z.input<typeof P.ArchiveToFile>): Promise<P.WrittenBytes | SinglePassResult> {
    // With manifestOut, the agent answers the single-pass result (archive and manifest from one read).
    return this.json(body.manifestOut ? A.SinglePassAnswer : A.WrittenBytesAnswer, "archive to file", "/v1/archive", body) as Promise<P.WrittenBytes | SinglePassResult>;
  }
  stat(path: string) {
    return this.json(A.StatAnswer, "stat", `/v1/stat?${qs({ path })}`, undefined, "GET", "short");
  }
  readFile(path: string) {
    return this.call("read file", `/v1/files?${qs({ path })}`);
  }
  /**
   * A streamed single-pass archive's result file (container/archive/archive.ts): its result, or, when the archive failed, the
   * error the agent recorded there before it cut the stream. A runtime that ends a destroyed response cleanly (Bun)
   * makes a failed archive look like a short, complete one: the recorded error is what tells them apart.
   */
  async streamedResult(what: string, resultOut: string): Promise<SinglePassResult> {
    const answer = await (await this.readFile(resultOut)).json() as SinglePassResult & RecordedFailure;
    const failed = recordedFailure(what, answer);
    if (failed) throw failed;
    return answer;
  }
  /** Why a streamed single-pass archive broke off, as recorded in its result file; undefined when nothing is. */
  async streamedFailure(what: string, resultOut: string): Promise<AgentCallError | undefined> {
    const answer = await this.readFile(resultOut).then((r) => r.json() as Promise<RecordedFailure>, () => undefined);
    return answer ? recordedFailure(what, answer) : undefined;
  }
  writeFile(path: string, body: ReadableStream<Uint8Array>) {
    return this.call("write file", `/v1/files?${qs({ path })}`, { method: "PUT", body }).then(async (r) => this.parsed(A.WrittenBytesAnswer, "write file", await r.json()));
  }
  deleteFile(path: string) {
    return this.json(z.looseObject({ deleted: z.boolean() }), "delete file", `/v1/files?${qs({ path })}`, undefined, "DELETE", "short");
  }
  extractStream(q: z.input<typeof P.ExtractQuery>, body: ReadableStream<Uint8Array>) {
    return this.call("extract", `/v1/extract?${qs(q as Query)}`, { method: "PUT", body }).then(async (r) => this.parsed(A.WrittenBytesAnswer, "extract", await r.json()));
  }
  extractFile(body: z.input<typeof P.ExtractFile>) {
    return this.json(A.WrittenBytesAnswer, "extract file", "/v1/extract", body);
  }
  /** Plans a delta against a base manifest, streamed to the agent (it can be megabytes). */
  async delta(path: string, list: string, base: ReadableStream<Uint8Array>) {
    const head = new TextEncoder().encode(`{"path":${JSON.stringify(path)},"list":${JSON.stringify(list)},"base":`);
    const body = concatStreams([head, base, new TextEncoder().encode("}")]);
    const r = await this.call("plan delta", "/v1/delta", { method: "POST", body, headers: { "content-type": "application/json" } });
    return this.parsed(A.DeltaAnswer, "plan delta", await r.json());
  }
  /** An overlay delta's list and layer manifest, from the overlay's upper directory (container/mounts/overlay-layer.ts). */
  overlayLayer(body: z.input<typeof P.OverlayLayerBody>) {
    return this.json(A.OverlayLayerAnswer, "overlay layer", "/v1/overlay-layer", body);
  }
  removeEntries(path: string, entries: string[]) {
    return this.json(z.looseObject({ removed: z.number().int().nonnegative() }), "remove entries", "/v1/remove", { path, entries });
  }
  split(path: string, chunkBytes: number) {
    return this.json(z.looseObject({ chunks: z.array(z.looseObject({ path: z.string(), bytes: z.number().int().nonnegative() })) }), "split", "/v1/split", { path, chunkBytes });
  }
  hashUrl(url: string) {
    return this.json(A.WrittenBytesAnswer, "hash stored object", "/v1/hash-url", { url });
  }
  /** `bytes`, when known, fits the call's deadline to the work (agent-deadlines.ts); likewise below. */
  uploadToUrl(body: z.input<typeof P.UploadBody>, bytes?: number) {
    return this.json(A.WrittenBytesAnswer, "presigned upload", "/v1/upload", body, "POST", { long: { bytes } });
  }
  downloadFromUrl(body: z.input<typeof P.DownloadBody>, bytes?: number) {
    // To a file, the size goes with the request: the agent picks its downloader by it (container/transfer/engine-get.ts).
    const sized = "output" in body && bytes !== undefined ? { ...body, size: bytes } : body;
    return this.json(A.DownloadAnswer, "presigned download", "/v1/download", sized, "POST", { long: { bytes } });
  }
  /** Parsed, not cast: its ETags and part hashes go into the completion the Worker sends the store. */
  /** How large a tar archive of the tree at `path` can be at most (a metadata pass: container/transfer/tree-size.ts). */
  treeSize(path: string) {
    return this.json(TreeSizeResult, "tree size", "/v1/tree-size", { path }, "POST");
  }
  /** The file-level backup (the native engine's files-pack): the pack PUT in parts, the index and manifest written. */
  filesPack(body: z.input<typeof P.FilesPackBody>, bytes?: number): Promise<P.FilesPackResult> {
    return this.json(FilesPackResult, "file-level backup", "/v1/files/pack", body, "POST", { long: { bytes } });
  }
  /** A file-level wake's content check (its files hashed where they are served); `bytes` what it reads, for the deadline. */
  filesCheck(body: z.input<typeof P.FilesCheckBody>, bytes?: number): Promise<P.FilesCheckResult> {
    return this.json(FilesCheckResult, "file-level content check", "/v1/files/check", body, "POST", { long: { bytes } });
  }
  /** The file-level restore (files-unpack): the tree made beneath `path` from the index and the packs' URLs. */
  filesUnpack(body: z.input<typeof P.FilesUnpackBody>, bytes?: number): Promise<P.FilesUnpackResult> {
    return this.json(FilesUnpackResult, "file-level restore", "/v1/files/unpack", body, "POST", { long: { bytes } });
  }
  async uploadMultipart(body: z.input<typeof P.UploadMultipartBody>, bytes?: number): Promise<P.UploadMultipartResult> {
    const what = "presigned multipart upload";
    return this.json(UploadMultipartResult, what, "/v1/upload-multipart", body, "POST", { long: { bytes } });
  }
  downloadRanged(body: z.input<typeof P.DownloadRangedBody>, bytes?: number) {
    return this.json(A.WrittenBytesAnswer.extend({ tool: z.string(), ranges: z.number().optional(), peakBufferedBytes: z.number().optional() }), "ranged download", "/v1/download-ranged", body, "POST", { long: { bytes } });
  }
  makeImage(body: z.input<typeof P.ImageBody> & { manifestOut: string }): Promise<SinglePassResult & { onePass: boolean }>;
  makeImage(body: z.input<typeof P.ImageBody>): Promise<P.WrittenBytes>;
  makeImage(body: z.input<typeof P.ImageBody>): Promise<P.WrittenBytes | (SinglePassResult & { onePass: boolean })> {
    // With manifestOut, the image and its manifest (from one read where the format allows it).
    return this.json(body.manifestOut ? A.ImageAnswer : A.WrittenBytesAnswer, "make image", "/v1/image", body) as Promise<P.WrittenBytes | (SinglePassResult & { onePass: boolean })>;
  }
  materialize(body: z.input<typeof P.MaterializeBody>) {
    return this.json(A.MaterializeAnswer, "materialize", "/v1/materialize", body);
  }
  mountOverlay(body: z.input<typeof P.OverlayBody>) {
    return this.json(z.looseObject({ upper: z.string(), work: z.string(), ms: z.number(), mounted: A.MountEntryAnswer }), "mount overlay", "/v1/overlay", body);
  }
  /** A read-only overlay of an overlay delta chain's layers (topmost first) over its image's mount. */
  mountOverlayStack(body: z.input<typeof P.OverlayStackBody>) {
    return this.json(z.looseObject({ ms: z.number(), mounted: A.MountEntryAnswer }), "mount overlay stack", "/v1/overlay/stack", body);
  }
  mounts() {
    return this.json(z.looseObject({ mounts: z.array(A.MountEntryAnswer) }), "list mounts", "/v1/mounts", undefined, "GET", "short");
  }
  unmount(path: string) {
    return this.json(z.looseObject({ unmounted: z.array(z.string()) }), "unmount", `/v1/mounts?${qs({ path })}`, undefined, "DELETE", "short");
  }
  /** Unmounts what stands at each of `unmount` (nothing there is fine), then deletes each of `remove`: one call. */
  clear(body: z.input<typeof P.ClearBody>) {
    return this.json(z.looseObject({ unmounted: z.array(z.string()), removed: z.number(), ms: z.number() }), "clear", "/v1/clear", body, "POST", "short");
  }
  /** Cuts a staged image into content-addressed chunks; the index is also left at `output` for the upload. */
  indexChunks(body: z.input<typeof P.ChunkIndexBody>) {
    return this.json(A.ChunkIndexAnswer, "index chunks", "/v1/chunks/index", body);
  }
  /** PUTs the chunks `urls` names (the ones the store lacks) from the staged image. */
  uploadChunks(body: z.input<typeof P.ChunkUploadBody>) {
    return this.json(A.ChunkUploadAnswer, "upload chunks", "/v1/chunks/upload", body);
  }
  /** Mounts an image read-only before it is downloaded (the lazy FUSE file under it). */
  lazyMount(body: z.input<typeof P.LazyMountBody>) {
    return this.json(A.LazyMountAnswer, "lazy mount", "/v1/lazy/mount", body);
  }
  /** Serves a file-level index's tree read-only at `mountpoint` before its chunks are fetched (snapflow-lazy files-mount). */
  filesMount(body: z.input<typeof P.FilesMountBody>) {
    return this.json(A.FilesMountAnswer, "files mount", "/v1/files/mount", body);
  }
  /** More URLs for a lazy mount started with moreUrls; `last` says none follow. */
  lazyUrls(body: z.input<typeof P.LazyUrlsBody>) {
    return this.json(z.looseObject({ urls: z.number() }), "lazy urls", "/v1/lazy/urls", body);
  }
  /** Waits (at most timeoutMs) until a lazy mount's image is complete or its prefetch has ended. */
  lazyWait(body: z.input<typeof P.LazyWaitBody>) {
    return this.json(A.LazyStatusAnswer.extend({ waitedMs: z.number(), running: z.boolean() }), "wait for lazy mount", "/v1/lazy/wait", body, "POST", { long: { extraMs: body.timeoutMs ?? 0 } });
  }
  /** A restore's swap (container/extract/tree-swap.ts): plan, swap in, commit, roll back, or read its journal. */
  planSwap(target: string, id: string) {
    return this.json(A.SwapJournalAnswer, "plan the swap", "/v1/swap/plan", { target, id }, "POST", "short");
  }
  /** `mount`: nothing was built beside the target; the agent mounts this tree at it, in the same call (SwapInBody). */
  swapIn(target: string, id: string, o: { mount?: z.input<typeof P.SwapMount>; clear?: z.input<typeof P.ClearBody> } = {}) {
    return this.json(z.looseObject({ swapped: z.literal(true), hadTarget: z.boolean(), unmounted: z.array(z.string()), ms: z.number(), mountAtMs: z.number().optional(), mounted: A.MountEntryAnswer.optional() }), "swap the new tree in", "/v1/swap/in", { target, id, ...o }, "POST", "short");
  }
  commitSwap(target: string, id: string) {
    return this.json(z.looseObject({ committed: z.boolean(), removedOld: z.boolean() }), "commit the swap", "/v1/swap/commit", { target, id }, "POST", "short");
  }
  rollbackSwap(target: string, id: string) {
    return this.json(z.looseObject({ rolledBack: z.string(), restoredOld: z.boolean() }), "roll the swap back", "/v1/swap/rollback", { target, id }, "POST", "short");
  }
  swapState(target: string, id: string) {
    return this.json(z.union([A.SwapJournalAnswer, z.looseObject({ id: z.string(), state: z.literal("none") })]), "read the swap", `/v1/swap?${qs({ target, id })}`, undefined, "GET", "short");
  }
  /** Free space on the filesystem that holds `path` (or would), and its device (two paths on one share it). */
  space(path: string) {
    return this.json(z.looseObject({ path: z.string(), freeBytes: z.number(), totalBytes: z.number(), device: z.string() }), "disk space", `/v1/space?${qs({ path })}`, undefined, "GET", "short");
  }
  armFault(route: string, times: number) {
    return this.json(z.unknown(), "arm fault", "/v1/faults", { route, times }, "POST", "short");
  }
}

/** One stream made of byte arrays and streams, in order, read lazily. */
function concatStreams(parts: (Uint8Array | ReadableStream<Uint8Array>)[]): ReadableStream<Uint8Array> {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  (async () => {
    const writer = writable.getWriter();
    try {
      for (const part of parts) {
        if (part instanceof Uint8Array) await writer.write(part);
        else for await (const chunk of part) await writer.write(chunk);
      }
      await writer.close();
    } catch (e) {
      await writer.abort(e);
    }
  })();
  return readable;
}

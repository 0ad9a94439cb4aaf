// What the CLI prints about a backup or restore for a person: a line per step as it finishes, then one result line
// that says what came of it and what to do next, or one failure line naming the step, the sandbox and the path.
// `--json` prints the API's status instead. Pure: the Worker tests feed these the API's real answers.
//
// A line must not mislead: a step that moved nothing gets no rate (a verify that only compared a stored size is
// not "51074 MB/s"); a chunked backup's transfer reports the chunks it uploaded, not the few kB of its index.
import { inFlagWords } from "./api-error-line.ts";
import type { RunStatus } from "./api-client.ts";
import { swappedInByTransfer, usableStep } from "../../src/restore/usable-step.ts";

type Step = RunStatus["steps"][string];

/** Bytes for a person: kB below 1 MB (never "0.0 MB" for a 4 kB index), MB above, GB past 10 GB. */
export function size(n: number): string {
  if (n < 1e6) return `${(n / 1e3).toFixed(n < 1e4 ? 1 : 0)} kB`;
  if (n < 1e10) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(1)} GB`;
}

export const seconds = (ms: number): string => (ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`);

/** A rate only where a megabyte or more moved: a few kB over a few ms is noise, not a speed. */
const rate = (bytes: number, ms: number) => (bytes >= 1e6 && ms > 0 ? `, ${(bytes / 1e6 / (ms / 1000)).toFixed(1)} MB/s` : "");

const num = (x: unknown): number | undefined => (typeof x === "number" ? x : undefined);
const obj = (x: unknown): Record<string, unknown> => (x && typeof x === "object" ? (x as Record<string, unknown>) : {});

/** What a step did, in words (after its time): bytes moved with their rate, or what it checked. */
function stepNote(kind: "backup" | "restore", name: string, s: Step): string {
  if (kind === "backup") {
    if (name === "archive") return s.overlapped ? "archived in the transfer's one pass" : s.bytes ? `wrote ${size(s.bytes)}${rate(s.bytes, s.ms)}` : "";
    if (name === "transfer") {
      const chunks = obj(s.chunks);
      const up = num(chunks.uploadedBytes);
      if (up !== undefined) {
        const image = num(chunks.imageBytes) ?? 0;
        if (up === 0) return `uploaded nothing: all ${chunks.count} chunks of the ${size(image)} image were in the store`;
        return `uploaded ${size(up)} in ${chunks.uploadedChunks} new chunks of ${chunks.count} (image ${size(image)})${rate(up, s.ms)}`;
      }
      return `sent ${size(s.bytes)}${rate(s.bytes, s.ms)}`;
    }
    if (name === "verify") return [s.checked && `checked: ${s.checked}`, s.chunksChecked && `${s.chunksChecked} chunks`].filter(Boolean).join(", ");
    if (name === "record") return "snapshot recorded";
    return "";
  }
  if (name === "transfer") {
    // A tree made at the target (or a wake's overlay) went in at the end of the transfer: no materialize step follows.
    const inAt = s.swappedIn === true ? `; ${s.how === "lazy" ? "mounted lazily" : "in at the target"}: usable ${num(s.usableMs) ?? "?"} ms after the request` : "";
    return `fetched ${size(s.bytes)}${rate(s.bytes, s.ms)}${s.extractedWhileReceiving ? ", extracted while receiving" : ""}${inAt}`;
  }
  if (name === "materialize") {
    if (s.overlapped) return "done while receiving";
    if (s.how === "lazy") return `mounted lazily: usable ${num(s.usableMs) ?? "?"} ms after the request`;
    return typeof s.how === "string" ? String(s.how) : "";
  }
  if (name === "verify") {
    const by = obj(s.verified).by;
    const complete = num(s.completeMs);
    return [s.files !== undefined && `${s.files} files verified${by ? `: ${by}` : ""}`, complete !== undefined && `every chunk local at ${complete} ms`].filter(Boolean).join("; ");
  }
  // (It removes the tree swapped out, which for a fresh sandbox was the empty directory the agent made: not news.)
  if (name === "record") return "recorded";
  return "";
}

/** `  transfer      955 ms  sent 25.6 MB, 26.8 MB/s` */
export function stepLine(kind: "backup" | "restore", name: string, s: Step): string {
  const note = stepNote(kind, name, s);
  return `  ${name.padEnd(12)}${seconds(s.ms).padStart(8)}${note ? `  ${note}` : ""}`;
}

export interface SnapshotFacts {
  manifest: { files: number; bytes: number };
  archive: { bytes: number };
  chunks?: { imageBytes: number; uploadedBytes: number };
}

const wall = (s: RunStatus) => (s as { wallMs?: number }).wallMs ?? s.totalMs ?? 0;

/** The backup's result: what was stored, how long it took, and the command that brings it back. */
export function backupResultLine(s: RunStatus, snapshot: SnapshotFacts, where: { path: string }): string {
  const stored = snapshot.chunks
    ? `${size(snapshot.chunks.imageBytes)} image${snapshot.chunks.uploadedBytes === 0 ? " (no new chunks: all in the store already)" : snapshot.chunks.uploadedBytes < snapshot.chunks.imageBytes ? ` (${size(snapshot.chunks.uploadedBytes)} of it new)` : ""}`
    : size(snapshot.archive.bytes);
  return `snapshot ${s.id}: ${snapshot.manifest.files} files, ${size(snapshot.manifest.bytes)} → ${stored} in ${seconds(wall(s))}. ` +
    `Restore it: npx snapflow restore --snapshot ${s.id} --sandbox SANDBOX --path ${where.path}`;
}

/** The restore's result: what arrived where, when it was usable and when complete. */
export function restoreResultLine(s: RunStatus, where?: { sandbox: string; path: string; hostPath?: string }): string {
  const v = s.steps.verify ?? ({ ms: 0, bytes: 0 } as Step);
  const usable = num(usableStep(s.steps)?.usableMs);
  const complete = num(v.completeMs);
  const when = usable !== undefined ? `usable after ${seconds(usable)} (lazy), complete after ${seconds(complete ?? wall(s))}` : `in ${seconds(wall(s))}`;
  // (Followed by id alone, `status --follow`, a restore's status does not say where it went.)
  return `restored ${s.snapshotId}${where ? ` into ${where.sandbox}:${where.path}` : ""}: ${v.files ?? "?"} files, ${size(v.bytes)}, verified, ${when}` +
    `${v.replaced ? "; what was there is replaced" : ""}${where?.hostPath ? ` (on this host: ${where.hostPath})` : ""}`;
}

/** The step a run stopped in: the first of its phases it did not finish. */
export function stoppedAt(kind: "backup" | "restore", s: RunStatus): string {
  // A restore whose transfer swapped its tree in has no materialize step.
  const phases = kind === "backup" ? ["probe", "archive", "transfer", "verify", "record"] : ["probe", "transfer", ...(swappedInByTransfer(s.steps) ? [] : ["materialize"]), "verify", "record"];
  return phases.find((p) => !s.steps[p]) ?? "cleanup";
}

/**
 * One line for a run that did not complete: the step, the sandbox and path, and the cause in the CLI's words (the
 * Workflow's "NonRetryableError: " class name dropped, the API's field names turned into flags).
 */
export function failureLine(kind: "backup" | "restore", s: RunStatus, where?: { sandbox: string; path: string }): string {
  const at = `${kind} ${s.id}${where ? ` of ${where.sandbox}:${where.path}` : ""}`;
  if ((s.status as string) === "cancelled") return `snapflow ${kind}: ${at} was cancelled at ${stoppedAt(kind, s)}; nothing of it is left`;
  const cause = inFlagWords((s.error ?? `its Workflow ended ${s.status}`).replace(/^(?:[A-Za-z]*Error: )+/, ""));
  return `snapflow ${kind}: ${at} failed at ${stoppedAt(kind, s)}: ${cause}`;
}

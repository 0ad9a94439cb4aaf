// The five phases of a restore, as plain functions; run-restore.ts runs them in order, a Workflow each in its own
// step.do. The strategy's plan (restore-plan.ts: an archive, or the overlay) does the probe's checks, the
// transfer, the materialization and the cleanup; verify and record are the same for every plan.
//
//   probe       → the snapshot is good (indexed), the strategy fits its format, the sandbox has the tools,
//                 the target is empty (or `replace` was asked for) and the disk can hold the new tree beside
//                 the old one (space-check.ts); plans the swap: the new tree is built beside the target
//   transfer    → archive bytes from the store into the sandbox: to a staging file, or piped into the
//                 extractor (then materialize is overlapped); the SHA-256 of what arrived is checked. A tree
//                 made at the target (a lazy mount over its index, a trusted image) or a file-level wake's overlay
//                 is then swapped in here, usable before it is checked or local, and no materialize step runs
//   materialize → extract or mount the staged archive, beside the target (a fork's lazy base instead starts
//                 its helper and swaps the tree in at once, its overlay at the target)
//   verify      → the agent compares the new tree with the snapshot's manifest, then swaps it in by rename
//                 (the old tree is kept beside the target); a lazy tree is walked at the target and waited for
//                 until every chunk is local and verified
//   record      → restore record in the store; then the old tree is removed (commit)
//
// Until the swap, the target is untouched; until record, the old tree can be put back. A failure runs
// cleanupRestore, which puts the target back exactly as it was (container/extract/tree-swap.ts).
import type { ManifestSource } from "../../container/contract/protocol.ts";
import { setFilesLineage } from "../snapshots/files-lineage.ts";
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { manifestSource } from "../snapshots/manifest-source.ts";
import { putJson, readSnapshot, restoreRecordKey, type StepResult } from "../snapshots/records.ts";
import { releaseLease, takeLease } from "../snapshots/restore-leases.ts";
import { pairFidelity } from "../strategies/fidelity.ts";
import { findRestore, type RestoreStrategy } from "../strategies/registry.ts";
import { checkedBeneath, contentCheckReason, recordContentChecked } from "./content-check.ts";
import { signedChain } from "../snapshots/index-chain.ts";
import type { RestoreContext } from "./restore-context.ts";
import type { RestoreParams, RestoreProbeResult } from "./restore-params.ts";
import { planOf } from "./plans.ts";
import { settled } from "../phases/settled.ts";
import { checkRestoreSpace, spacePaths } from "./space-check.ts";
import { checkTarget } from "./target-check.ts";
import { swappedInByTransfer, usableStep } from "./usable-step.ts";

const contextOf = (d: Deps, p: RestoreParams, s: RestoreStrategy): RestoreContext => ({ d, p, s, agent: new AgentClient(d.transport, p.sandboxId) });

export async function probePhase(d: Deps, p: RestoreParams, s: RestoreStrategy): Promise<RestoreProbeResult> {
  const t = performance.now();
  const c = contextOf(d, p, s);
  // Asked at once, while the store is read; each answer is taken (and its failure reported) where the plan's probe
  // needs it, and none is left unhandled if the probe ends before.
  c.asked = { tools: c.agent.probe(), target: checkTarget(c) };
  // So are the free space where the strategy writes (its paths depend on the strategy alone) and, for `replace`,
  // what the target holds: a wake waits for this step, and these answers no longer wait for the record and the plan
  // (~10-15 ms of agent round trips after them, before). Nothing here writes in the sandbox: the swap's journal, which
  // makes the target's parent, is asked only once the plan accepted the restore.
  const early = {
    spaces: new Map(spacePaths(s, p.path).map((path) => [path, c.agent.space(path)] as const)),
    stated: p.replace ? c.agent.stat(p.path) : undefined,
  };
  for (const asked of [...Object.values(c.asked), ...early.spaces.values(), early.stated]) (asked as Promise<unknown> | undefined)?.catch(() => {});
  let journaled: ReturnType<AgentClient["planSwap"]> | undefined;
  // Where the probe's time goes, each part ending at (ms since the step began): a wake waits for all of it.
  const parts: Record<string, number> = {};
  const mark = (part: string) => (parts[part] = since(t));
  c.asked.tools.then(() => mark("tools"), () => {});
  // The lease before the record is read: a delete either sees the lease or this probe sees no record
  // (restore-leases.ts). Taken by the request already (leasedByRequest), it is only refreshed, beside the read.
  const leased = takeLease(d.store, p.snapshotId, p.restoreId);
  if (p.leasedByRequest) leased.catch(() => {});
  else await leased;
  mark("lease");
  let planned: Awaited<ReturnType<ReturnType<typeof planOf>["probe"]>> & { swap?: RestoreProbeResult["swap"]; space?: unknown; contentCheck?: string; replacing?: boolean };
  try {
    const [snapshot] = await Promise.all([readSnapshot(d.store, d.kv, p.snapshotId), leased]);
    mark("record");
    if (!snapshot) throw new SnapflowError("not_found", `snapshot ${p.snapshotId} does not exist (or did not complete)`, { field: "snapshotId" });
    planned = { ...(await planOf(s).probe(c, snapshot)), contentCheck: contentCheckReason(snapshot, p) };
    mark("plan");
    // Can the sandbox hold the new tree beside the old one (and a staged archive)? And whether the swap will replace
    // anything: a fresh sandbox's /workspace exists (the agent makes its roots) but holds nothing, and without
    // `replace` the target was found empty; the swap's own hadTarget means "existed". Beside them, the journal that
    // says where the new tree goes, so a cleanup after any later failure finds it (rolled back below if a check
    // refuses the restore). A shortage of space is answered first.
    journaled = c.agent.planSwap(p.path, p.restoreId);
    const [spaced, stated, journal] = await Promise.allSettled([checkRestoreSpace(c.agent, p.sandboxId, s, p.path, planned, early.spaces), early.stated, journaled]);
    const space = settled(spaced);
    const target = settled(stated);
    planned = { ...planned, space, replacing: !!target?.exists && (target.type !== "dir" || (target.entries ?? 0) > 0) };
    mark("space");
    const swap = settled(journal);
    mark("swapPlan");
    planned = { ...planned, swap: { staged: swap.staged, old: swap.old } };
  } catch (e) {
    // The restore never started: a journal asked above is rolled back, and it holds nothing. (A lease the request
    // took stays until the run ends: a retried probe reads the record beside refreshing it, so it must be there
    // already; the run's failure path releases it.)
    await journaled?.then(() => c.agent.rollbackSwap(p.path, p.restoreId), () => {}).catch(() => {});
    if (!p.leasedByRequest) await releaseLease(d.store, p.snapshotId, p.restoreId);
    throw e;
  }
  const ms = since(t);
  // Dropping caches (sync first) is preparation, not probing: its time is reported apart from the step's.
  const caches = p.dropCaches ? await c.agent.dropCaches() : undefined;
  return { ms, bytes: 0, ...planned, probeParts: parts, swap: planned.swap!, ...(caches ? { cachesDropped: caches.dropped, cacheDropMs: caches.ms, ...(caches.reason ? { cacheReason: caches.reason } : {}) } : {}) };
}

export function transferPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  return planOf(s).transfer(contextOf(d, p, s), probed);
}

export async function materializePhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  const at = Date.now();
  const made = await planOf(s).materialize(contextOf(d, p, s), probed);
  // A tree swapped in at the end of materialize (a lazy mount's) is usable now: from this step's start to here is the
  // figure issue 10's "usable ≤ 0.1 s after materialize starts" is about.
  return made.swappedIn === true ? { ...made, usableAfterMaterializeMs: Date.now() - at } : made;
}

/**
 * Verify, without reading the restored bytes again when they were checked on arrival: an extraction that compared
 * every entry as it streamed into tar and then walked the tree's metadata is done (`verified` in its step); a
 * mounted or extracted image, whose content its SHA-256 vouched for on arrival, gets the metadata walk here; with
 * deepVerify, every file is hashed again. The new tree is checked where it was built, beside the target; only then
 * is it swapped in (the old tree kept beside it until record). A retried step that finds the swap begun finishes
 * it: only a verified tree is ever swapped in. `commit`: no record step follows (a benchmark cell), so the old
 * tree goes at once.
 */
export async function verifyPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult, steps: Record<string, StepResult> = {}, options: { commit?: boolean; deferCheck?: boolean } = {}): Promise<StepResult> {
  const t = performance.now();
  const c = contextOf(d, p, s);
  const journal = await c.agent.swapState(p.path, p.restoreId);
  if (journal.state === "none") throw new SnapflowError("snapshot_unusable", `restore ${p.restoreId}: the swap its probe planned for ${p.path} is gone (the agent's sweeper rolled it back?)`);
  const plan = planOf(s);
  // A tree that went in at the end of materialize or of the transfer (a lazy one, a trusted image: usable at once)
  // is checked at the target, in afterSwap.
  const inAlready = swappedInEarly(steps);
  // deferCheck (a compaction's wake: its tree is checked once its image is made, compaction-check.ts): a lazy tree is
  // not walked here; afterSwap still hands the helper its chunk URLs and waits until every chunk is local.
  const deferred = options.deferCheck === true && inAlready;
  const check = deferred
    ? async (): Promise<StepResult> => ({ ms: 0, bytes: 0, deferred: "not walked: the compaction checks the tree once its image is made" })
    : (path = probed.swap.staged) => verifyStaged(d, p, s, probed, steps, path);
  const checked = inAlready
    ? { ms: 0, bytes: 0, deferred: `swapped in by ${swappedInByTransfer(steps) ? "the transfer" : "materialize"}: checked at the target (verified says how)` }
    : journal.state === "staging"
      ? await (plan.verify ? plan.verify(c, probed, check) : check())
      : { ms: 0, bytes: probed.snapshot.manifest.bytes, files: probed.snapshot.manifest.files, verified: { by: "verified by an earlier attempt, before its swap" } };
  // Repeatable: a tree already in is answered as made (or, after an agent restart, made again at the target).
  const swapped = await plan.swapIn(c, probed);
  const after: Record<string, unknown> = plan.afterSwap ? await plan.afterSwap(c, probed, check) : {};
  if (options.commit) await c.agent.commitSwap(p.path, p.restoreId);
  return { ...checked, ...after, ms: since(t), swapMs: swapped.ms, replaced: probed.replacing ?? swapped.hadTarget, ...(swapped.remounted ? { remounted: swapped.remounted } : {}) };
}

async function verifyStaged(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult, steps: Record<string, StepResult>, path: string): Promise<StepResult> {
  const t = performance.now();
  const { bytes, files, dirs, symlinks } = probed.snapshot.manifest;
  const inStream = [steps.transfer?.verified, steps.materialize?.verified].find((v) => (v as { metadata?: string } | undefined)?.metadata === "walk");
  if (inStream && !p.deepVerify) {
    return { ms: since(t), bytes, files, dirs, symlinks, verified: { ...(inStream as object), by: "in-stream while extracting, then a metadata walk" } };
  }
  // A mounted image is the image the backup stored (its SHA-256 was checked on arrival) served as it is, and its
  // content agrees with the manifest: checked once, by the first restore outside its source, or this is its source
  // (content-check.ts). A walk would only read every inode of the fresh mount again, about 1 s for 31k entries cold
  // (issue 23), to learn nothing. deepVerify still hashes every file.
  // (Not the SDK's restore: its container downloads the image itself, unchecked, so its tree is walked: sdk-plan.ts.)
  const served = planOf(s).servesCheckedImage(s, probed);
  if (served === "index") {
    // A file-level wake due its content check: its files hashed where they are served, by the engine (or only those
    // its layer sets, over an index already checked); its metadata is the index's either way.
    if (probed.contentCheck) return checkServedIndex(d, p, probed, path, t);
    return { ms: since(t), bytes, files, dirs, symlinks, verified: { content: "chunk-sha256", metadata: "index", by: "the index's SHA-256 (and its chain's) on arrival and each chunk's before it was served; its content was checked against the index once (or this sandbox made it), and the tree is that index served as it is, so it is not walked" } };
  }
  if (served && !probed.contentCheck) {
    // A lazy mount (swapped in before verify) is the image too, checked chunk by chunk as it is read.
    return swappedInEarly(steps)
      ? { ms: since(t), bytes, files, dirs, symlinks, verified: { content: "chunk-sha256", metadata: "image", by: "each chunk's SHA-256 (against the index the record vouches for) before any byte of it was served; the image's content was checked against the manifest once, so the mount is not walked" } }
      : { ms: since(t), bytes, files, dirs, symlinks, verified: { content: "image-sha256", metadata: "image", by: "the image's SHA-256 on arrival; its content was checked against the manifest once, so the mount is not walked" } };
  }
  // Every file hashed when asked, or when the image alone is not trusted here (content-check.ts).
  const deep = probed.contentCheck !== undefined;
  const v = await verifyTreeAgainst(d, p, probed, path, { deep });
  if (deep && probed.contentCheck !== "deepVerify") await recordContentChecked(d, p);
  // A lazy tree (swapped in before verify) never had its image hashed whole: each chunk was, before any byte of it was served.
  const lazy = swappedInEarly(steps);
  const by = deep ? `every file hashed against the manifest (${probed.contentCheck})` : lazy ? "each chunk's SHA-256 before it was served, then a metadata walk" : "the image's SHA-256 on arrival, then a metadata walk";
  return { ms: since(t), bytes: v.totals.bytes, files: v.totals.files, dirs: v.totals.dirs, symlinks: v.totals.symlinks, agentMs: v.ms, verified: { ...v.verified, by } };
}

/**
 * The content check of a file-level tree served from its index (a wake with no overlay delta): each file the index
 * names hashed at the target by the engine (POST /v1/files/check) — or, over an index beneath already checked, each
 * its own layer sets — and compared with the index. A difference fails the restore, naming the first few.
 */
async function checkServedIndex(d: Deps, p: RestoreParams, probed: RestoreProbeResult, path: string, t: number): Promise<StepResult> {
  const base = probed.layers[0]!;
  const beneath = probed.contentCheck === "deepVerify" ? undefined : await checkedBeneath(d, base.chain);
  const [url, chain] = await Promise.all([d.presigner.url(base.archive.key, "GET"), signedChain(d.presigner, base.chain)]);
  const { bytes, files, dirs, symlinks } = probed.snapshot.manifest;
  const v = await new AgentClient(d.transport, p.sandboxId).filesCheck({ path, index: { url, sha256: base.archive.sha256, ...chain }, layerOnly: beneath !== undefined }, beneath ? undefined : bytes);
  if (!v.equal) {
    const first = v.differences.slice(0, 5).map((x) => `${x.kind} ${x.path}${x.field ? ` (${x.field})` : ""}`).join("; ");
    throw new SnapflowError("snapshot_unusable", `restored tree differs from snapshot ${p.snapshotId}: ${v.counts.missing} missing, ${v.counts.changed} changed; first: ${first}`);
  }
  if (probed.contentCheck !== "deepVerify") await recordContentChecked(d, p);
  const tree = "the tree is that index served as it is, so it is not walked";
  const by = beneath
    ? `the files its own layer sets hashed against the index (${probed.contentCheck}; the index beneath it, ${beneath}'s, was checked and holds the rest); ${tree}`
    : `every file hashed against the index (${probed.contentCheck}); ${tree}`;
  return { ms: since(t), bytes, files, dirs, symlinks, agentMs: v.ms, verified: { content: beneath ? "layer-hash" : "index-hash", metadata: "index", hashed: { files: v.files, bytes: v.bytes }, by } };
}

/** Did the tree go in at the target before verify (a lazy tree, at the end of materialize or of the transfer)? */
const swappedInEarly = (steps: Record<string, StepResult>) => usableStep(steps)?.swappedIn === true;

/**
 * The tree at `path` compared with the snapshot's manifest (an overlay chain's resolved through its layers) by the
 * agent: metadata, and with `deep` every file's SHA-256 — hashed again, or taken from `hashes`, a manifest of this
 * tree made by one read of it. A difference fails, naming the first few.
 */
export async function verifyTreeAgainst(d: Deps, p: RestoreParams, probed: RestoreProbeResult, path: string, o: { deep: boolean; hashes?: ManifestSource; walk?: false }) {
  if (!probed.snapshot.manifest.fromIndex && !(await d.store.head(probed.snapshot.manifest.key))) throw new SnapflowError("snapshot_unusable", `manifest ${probed.snapshot.manifest.key} of snapshot ${p.snapshotId} is missing`);
  // An overlay chain's layers (the image, each delta, this one last) carry their manifests: all but this one lie under it.
  const chain = probed.layers.length > 1 && probed.layers.every((l) => l.manifest) ? probed.layers.slice(0, -1).map((l) => l.manifest!) : undefined;
  const expected = await manifestSource(d.presigner, probed.snapshot.manifest, chain);
  // Holes are compared unless this pair cannot show them (a FUSE mount that reports every block: fidelity.ts).
  const restore = findRestore(p.strategy);
  const sparse = !restore || pairFidelity(probed.snapshot.format, restore).sparse === undefined;
  const v = await new AgentClient(d.transport, p.sandboxId).verifyTree({ path, expected, deep: o.deep, ...(o.hashes ? { hashes: o.hashes } : {}), ...(o.walk === false ? { walk: false } : {}), keepOwnership: p.keepOwnership, sparse });
  if (!v.equal) {
    const first = v.differences.slice(0, 5).map((x) => `${x.kind} ${x.path}${x.fields ? ` (${x.fields.map((f) => f.name).join(", ")})` : ""}`).join("; ");
    throw new SnapflowError("snapshot_unusable", `restored tree differs from snapshot ${p.snapshotId}: ${v.counts.missing} missing, ${v.counts.extra} extra, ${v.counts.changed} changed; first: ${first}`);
  }
  return v;
}

/**
 * The restore record, then the old tree goes (commit). A failure after the record is written retries the step
 * (both are repeatable); cleanupRestore, seeing the record, finishes the commit rather than undo a recorded restore.
 */
export async function recordPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, steps: Record<string, StepResult>, probed?: RestoreProbeResult): Promise<StepResult> {
  const t = performance.now();
  await putJson(d.store, restoreRecordKey(p.restoreId), { ...p, strategy: s.name, completedAt: new Date().toISOString(), verified: true, ...lazyMoments(steps), steps });
  const committed = await contextOf(d, p, s).agent.commitSwap(p.path, p.restoreId);
  // A file-level tree made here: the next file-level backup of it takes this snapshot as its parent (files-parent.ts);
  // a wake's overlay, the chain's file-level base, under this restore's layers (read alone by that backup).
  if (s.format.kind === "files") {
    const base = s.materialize === "overlay" ? probed?.layers?.[0] : undefined;
    if (base) await setFilesLineage(d, p.sandboxId, p.path, base.id, "restore", { restoreId: p.restoreId, deltas: probed!.layers!.length - 1 });
    else await setFilesLineage(d, p.sandboxId, p.path, p.snapshotId, "restore");
  }
  return { ms: since(t), bytes: 0, removedOld: committed.removedOld };
}

/**
 * A lazy restore's two moments, on the record itself: usable (request → the mount answers, from materialize) and
 * complete (request → every chunk local and verified, from verify), with which chunks came on demand and which ahead.
 */
function lazyMoments(steps: Record<string, StepResult>) {
  // usable: the tree answering at the target (materialize, or a file-level wake's transfer, swapped it in);
  // complete: every chunk local and verified.
  const usableMs = usableStep(steps)?.usableMs;
  const completeMs = steps.verify?.completeMs;
  const lazy = steps.verify?.lazy;
  return usableMs === undefined && completeMs === undefined ? {} : { usableMs, completeMs, ...(lazy ? { chunks: lazy } : {}) };
}

/** Has the restore been recorded? Then it succeeded, whatever failed after (success is final). */
export async function restoreRecorded(d: Deps, p: RestoreParams): Promise<boolean> {
  return (await d.store.head(restoreRecordKey(p.restoreId))) !== null;
}

/**
 * After a failed restore whose probe passed: take down its mounts, remove its staging files and put the target
 * back exactly as it was (tree-swap.ts rollback: the old tree returns, the new one goes). A restore that was
 * recorded is not undone: its commit is finished instead, and the answer says so (the run succeeded). (If the probe
 * failed, nothing was touched.)
 */
export async function cleanupRestore(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<{ recorded: boolean }> {
  const c = contextOf(d, p, s);
  const recorded = await restoreRecorded(d, p);
  if (recorded) {
    await c.agent.commitSwap(p.path, p.restoreId);
  } else {
    await planOf(s).cleanup(c, probed);
    await c.agent.rollbackSwap(p.path, p.restoreId);
  }
  await releaseLease(d.store, p.snapshotId, p.restoreId);
  return { recorded };
}

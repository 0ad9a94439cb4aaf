// npm start: the main job. Backs up a generated workspace through the BackupWorkflow and restores it into a fresh
// sandbox through the RestoreWorkflow, on the local stack (started here if none is running), prints a per-step
// timing table, and exits 0 only if the restored tree's manifest equals the source's. It removes what it made (the
// snapshot, both sandboxes; a run Ctrl-C interrupted is cancelled first), or with --keep says what it kept.
import { parseArgs } from "node:util";
import { DEFAULT_BACKUP } from "../src/strategies/registry.ts";
import { apiClient, ApiCallError, type RunStatus } from "./cli/api-client.ts";
import { findRunningStack, freePort, portIsFree, stackDir, startStack, wranglerPort, type Stack, type StackInfo } from "./stack/stack.ts";
import { processTree, sampleRss, type RssSample } from "./stack/rss.ts";
import { timingTable, type Row } from "./cli/timing-table.ts";
import { usableStep } from "../src/restore/usable-step.ts";

const HELP = `Usage: npm start [-- options]

Backs up a generated node_modules-like workspace and restores it into a fresh sandbox, verified file by file.
Uses the API in $SNAPFLOW_URL and $SNAPFLOW_TOKEN when both are set (as the CLI does), else the local stack if one
is running (npm run dev), otherwise starts one for the duration of the job. At the end, and on Ctrl-C, it removes
what it made: the snapshot and both sandboxes (a run still going is cancelled first).

Options:
  --files N            files in the generated workspace          (default 20000)
  --bytes N            total bytes of the generated workspace    (default 240000000)
  --seed N             dataset seed                              (default 1)
  --kind K             node-modules, or added-data (a node-modules base plus --added-bytes of
                       incompressible data, the shapes of snapshot-create-restore-benchmark.md)
  --added-bytes N      with --kind added-data                    (default 0)
  --backup NAME        backup strategy                           (default ${DEFAULT_BACKUP}, the API's)
  --restore NAME       restore strategy                          (default: the pipe restore for the format)
  --keep               keep the snapshot and the sandboxes (default: removed at the end); says where they are
  -h, --help           this help

Exit codes: 0 restored and verified; 1 a run failed or did not verify; 2 bad usage or the stack did not start.`;

const { values: opts } = parseArgs({
  options: {
    files: { type: "string", default: "20000" },
    bytes: { type: "string", default: "240000000" },
    seed: { type: "string", default: "1" },
    kind: { type: "string", default: "node-modules" },
    "added-bytes": { type: "string", default: "0" },
    backup: { type: "string", default: DEFAULT_BACKUP },
    restore: { type: "string" },
    keep: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
  strict: true,
});

if (opts.help) {
  console.log(HELP);
  process.exit(0);
}
const num = (name: string, value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`--${name} must be a whole number, got '${value}'`);
    process.exit(2);
  }
  return n;
};
const files = num("files", opts.files), bytes = num("bytes", opts.bytes), seed = num("seed", opts.seed);
const addedBytes = num("added-bytes", opts["added-bytes"]);
if (opts.kind !== "node-modules" && opts.kind !== "added-data") {
  console.error(`--kind must be node-modules or added-data, got '${opts.kind}'`);
  process.exit(2);
}

let stack: Stack | undefined;
// An API named by the environment (a deployed Worker, or a test's private stack) is used as it is: no stack is
// started, and its processes are not this host's to sample.
const given = process.env.SNAPFLOW_URL && process.env.SNAPFLOW_TOKEN ? { apiUrl: process.env.SNAPFLOW_URL, apiToken: process.env.SNAPFLOW_TOKEN } : undefined;
const running = given ? null : await findRunningStack();
// Our own stack takes 8787 when it is free, and any free port when something else holds it.
const info: Pick<StackInfo, "apiUrl" | "apiToken"> & Partial<StackInfo> = given ?? running ?? (stack = await startStack({ port: (await portIsFree(8787)) ? 8787 : await freePort() }).catch((e: Error) => {
  console.error(`could not start the local stack: ${e.message}`);
  process.exit(2);
}));
const stopStack = async () => stack?.stop();
console.error(given ? `using the API at ${info.apiUrl} ($SNAPFLOW_URL)` : running ? `using the running stack at ${info.apiUrl}` : `started a local stack at ${info.apiUrl}`);

const api = apiClient(info.apiUrl, info.apiToken);
const stamp = Date.now().toString(36);
const source = `main-src-${stamp}`;
const target = `main-dst-${stamp}`;
const rows: Row[] = [];
const memory: [string, { workerd: RssSample; agent: RssSample }][] = [];
const sampled = (run: string, m: { workerd: RssSample; agent: RssSample } | undefined) => m && memory.push([run, m]);
/** workerd (below wrangler dev) and the host agent, sampled while a run goes on (a stack on this host only). */
const watchRss = () => {
  const { wranglerPid, agentPid } = info;
  if (wranglerPid === undefined || agentPid === undefined) return { stop: () => undefined };
  const workerd = sampleRss(() => processTree(wranglerPid, "workerd"));
  const agent = sampleRss(() => [agentPid]);
  return { stop: () => ({ workerd: workerd.stop(), agent: agent.stop() }) };
};
let exitCode = 1;
const say = (line: string) => console.error(line);

// What this job made, so that it can remove it (or, with --keep, say where it is): the run in flight, the snapshot.
const made: { inFlight?: string; snapshot?: string; sandboxes: string[] } = { sandboxes: [] };
let interrupted = false;
/** The cancel Ctrl-C sent: its answer comes after the cleanup it runs, so the job waits for it before leaving. */
let cancelling: { id: string; answer: Promise<unknown> } | undefined;
const cancel = (id: string) => (cancelling = { id, answer: api.call<{ cleanup: string }>("POST", `/api/runs/${id}/cancel`).catch((e: Error) => e) }).answer;
/** After each wait: a Ctrl-C that came meanwhile ends the job here (the finally removes what it made). */
const checkpoint = () => {
  if (interrupted) throw new Error("interrupted");
};
/** Removes what the job made: a run still going is cancelled (it then leaves nothing), the snapshot deleted, the sandboxes ended. */
async function cleanUp(): Promise<void> {
  if (opts.keep) {
    const where = stack || running ? ` (on this host: ${stackDir({})}/sandboxes/)` : "";
    say(`kept (--keep): ${made.snapshot ? `snapshot ${made.snapshot} (npx snapflow delete ${made.snapshot} removes it), ` : ""}sandbox(es) ${made.sandboxes.join(" and ")}${where}`);
    return;
  }
  const removed: string[] = [];
  if (made.inFlight && !cancelling) void cancel(made.inFlight);
  if (cancelling && !((await cancelling.answer) instanceof Error)) removed.push(`run ${cancelling.id} (cancelled)`);
  if (made.snapshot && (await api.call("DELETE", `/api/snapshots/${made.snapshot}`).then(() => true, (e: Error) => (say(`snapflow: could not delete snapshot ${made.snapshot}: ${e.message}`), false)))) removed.push(`snapshot ${made.snapshot}`);
  for (const sandbox of made.sandboxes) if (await api.destroySandbox(sandbox).then(() => true, () => false)) removed.push(`sandbox ${sandbox}`);
  say(`removed what this job made: ${removed.join(", ") || "nothing was left"}`);
}

// Ctrl-C: the run in flight is cancelled, which ends its wait below; the finally then removes the rest and stops a
// stack started here. A second Ctrl-C leaves at once.
process.on("SIGINT", () => {
  if (interrupted) process.exit(130);
  interrupted = true;
  say(`\ninterrupted: ${made.inFlight ? `cancelling ${made.inFlight}, then ` : ""}removing what this job made (Ctrl-C again to leave now)...`);
  if (made.inFlight) void cancel(made.inFlight);
});

const stepLogger = (run: string) => (name: string, s: RunStatus["steps"][string]) => {
  say(`  ${run} ${name.padEnd(11)} ${String(s.ms).padStart(7)} ms ${s.bytes ? `${(s.bytes / 1e6).toFixed(1)} MB` : ""}`);
  const note = s.overlapped ? (name === "archive" ? "one pass: archived, hashed and uploaded during transfer" : "done during transfer") : s.ttfbMs !== undefined ? `first byte at ${s.ttfbMs} ms, ${s.parts} parts` : s.checked ? String(s.checked) : s.files ? `${s.files} files verified${(s.verified as { by?: string } | undefined)?.by ? `: ${(s.verified as { by: string }).by}` : ""}` : undefined;
  rows.push({ run, step: name, ms: s.ms, bytes: s.bytes, note });
};

try {
  made.sandboxes.push(source);
  say(`generating a workspace in sandbox ${source}: ${files} files, ${(bytes / 1e6).toFixed(0)} MB (seed ${seed})...`);
  const ds = await api.generateDataset(source, { path: "/workspace/app", kind: opts.kind, seed, files, bytes, ...(opts.kind === "added-data" ? { addedBytes } : {}) });
  say(`  generated ${ds.files} files, ${(ds.bytes / 1e6).toFixed(1)} MB in ${ds.ms} ms`);
  checkpoint();

  const b = await api.startBackup({ sandboxId: source, path: "/workspace/app", strategy: opts.backup });
  made.inFlight = b.id;
  if (interrupted) void cancel(b.id);
  say(`backup ${b.id} (${b.strategy}):`);
  let rss = watchRss();
  const backup = await api.waitFor("backup", b.id, stepLogger("backup"));
  made.inFlight = undefined;
  sampled("backup", rss.stop());
  if (backup.status !== "complete") throw new Error(`backup ${b.id} ${backup.status}: ${backup.error}`);
  made.snapshot = b.snapshotId;
  checkpoint();

  made.sandboxes.push(target);
  const r = await api.startRestore({ snapshotId: b.snapshotId, sandboxId: target, path: "/workspace/app", ...(opts.restore ? { strategy: opts.restore } : {}) });
  made.inFlight = r.id;
  if (interrupted) void cancel(r.id);
  say(`restore ${r.id} (${r.strategy}) into fresh sandbox ${target}:`);
  rss = watchRss();
  const restore = await api.waitFor("restore", r.id, stepLogger("restore"));
  made.inFlight = undefined;
  sampled("restore", rss.stop());
  if (restore.status !== "complete") throw new Error(`restore ${r.id} ${restore.status}: ${restore.error}`);
  checkpoint();

  rows.push({ run: "backup", step: "total", ms: backup.totalMs ?? 0, bytes: backup.steps.transfer?.bytes ?? 0 });
  rows.push({ run: "restore", step: "total", ms: restore.totalMs ?? 0, bytes: restore.steps.transfer?.bytes ?? 0 });
  console.log(`\nsnapflow: ${b.strategy} → ${r.strategy}, ${ds.files} files, ${(ds.bytes / 1e6).toFixed(1)} MB (${given ? `the API at ${info.apiUrl}` : "local stack, emulated R2 over S3"}; ${new Date().toISOString()})\n`);
  console.log(timingTable(rows));
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(0)} MiB`;
  if (memory.length) console.log("\nresident memory (sampled every 200 ms): before → peak → after");
  for (const [run, m] of memory) {
    console.log(`  ${run.padEnd(8)} workerd ${mib(m.workerd.before)} → ${mib(m.workerd.peak)} → ${mib(m.workerd.after)};  agent ${mib(m.agent.before)} → ${mib(m.agent.peak)} → ${mib(m.agent.after)}`);
  }
  // A chunked backup uploads only the chunks the store lacks; a lazy restore is usable before it is complete.
  const chunks = (backup.steps.transfer as { chunks?: { imageBytes: number; uploadedBytes: number } } | undefined)?.chunks;
  if (chunks) {
    const rest = chunks.uploadedBytes < chunks.imageBytes ? " (the rest: chunks already in the store, or repeated in the image)" : "";
    console.log(`\nchunks: uploaded ${(chunks.uploadedBytes / 1e6).toFixed(1)} MB of the image's ${(chunks.imageBytes / 1e6).toFixed(1)} MB${rest}`);
  }
  const usableMs = (usableStep(restore.steps) as { usableMs?: number } | undefined)?.usableMs;
  const completeMs = (restore.steps.verify as { completeMs?: number } | undefined)?.completeMs;
  if (usableMs !== undefined) console.log(`lazy restore: usable ${usableMs} ms after the request (the tree answers at the target), complete ${completeMs ?? "?"} ms (every chunk local and verified)`);
  const v = restore.steps.verify!;
  console.log(`\nrestored manifest equals source: ${v.files} files, ${v.dirs} dirs, ${v.symlinks} symlinks, ${v.bytes} bytes (snapshot ${b.snapshotId})`);
  // Only for a stack that outlives this job (npm run dev's): the one started here is stopped below.
  if (running) console.log(`inspect: npx wrangler workflows instances describe snapflow-backup ${b.id} --local${wranglerPort(info.apiUrl)}`);
  exitCode = 0;
} catch (e) {
  if (interrupted) say("snapflow: interrupted");
  else {
    const msg = e instanceof ApiCallError ? `${e.message}${e.field ? ` (field ${e.field})` : ""}` : (e as Error).message;
    console.error(`\nsnapflow: FAILED: ${msg}`);
    if (rows.length) console.error(timingTable(rows));
  }
} finally {
  await cleanUp();
  await stopStack();
}
process.exit(interrupted ? 130 : exitCode);

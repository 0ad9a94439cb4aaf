// `npx snapflow load`: the stack under load, watched for leaks. Against the running local stack (npm run dev) if
// there is one, else a private stack of its own (state in .snapflow/load/stack, a free port, removed afterwards).
// Phases: sources and their first snapshots; then 8 backups and 8 restores at once; then a 100-run matrix of small
// cells; then the load's sandboxes are ended. workerd's and the agent's RSS and open descriptors and the mounts
// under the project are sampled every second throughout; the verdicts (load-verdicts.ts) decide the exit code.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { apiClient } from "../../cli/api-client.ts";
import { machineDescription } from "../matrix-bench.ts";
import { findRunningStack, freePort, PROJECT, startStack, STATE, type Stack, type StackInfo } from "../../stack/stack.ts";
import { backupsAndRestores, endSandboxes, firstSnapshots, LOAD_SHAPE, makeSources, runMatrix, type MatrixOutcome } from "./load-work.ts";
import { writeLoadResults, loadMarkdown, type LoadResults } from "./load-report.ts";
import { fdsBack, judge } from "./load-verdicts.ts";
import { describeSample, startSampler } from "./sampler.ts";

const log = (line: string) => console.error(line);
const SETTLE_MS = 60_000;

export async function runLoad(o: { out?: string } = {}): Promise<number> {
  let own: Stack | undefined;
  const privateDir = join(STATE, "load", "stack");
  let info: StackInfo | null = await findRunningStack();
  if (info) log(`load: using the running stack at ${info.apiUrl}`);
  else {
    rmSync(privateDir, { recursive: true, force: true });
    own = await startStack({ port: await freePort(), privateDir, log });
    info = own;
  }
  const stopOwn = async () => {
    await own?.stop();
    // Data only: the logs stay in .snapflow/load/stack/logs.
    if (own) for (const d of ["s3", "sandboxes", "wrangler-state"]) rmSync(join(privateDir, d), { recursive: true, force: true });
    own = undefined;
  };
  const onSignal = () => void stopOwn().finally(() => process.exit(130));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const api = apiClient(info.apiUrl, info.apiToken);
    const sampler = startSampler({ wranglerPid: info.wranglerPid, agentPid: info.agentPid }, PROJECT);
    const startedAt = new Date().toISOString();
    const stamp = startedAt.replace(/[-:TZ.]/g, "").slice(0, 14);
    const t0 = Date.now();

    sampler.setPhase("prepare");
    const sources = await makeSources(api, stamp, LOAD_SHAPE);
    const firsts = await firstSnapshots(api, sources);
    const prepareMs = Date.now() - t0;
    log(`load: ${sources.length} sources and their first snapshots in ${(prepareMs / 1000).toFixed(1)} s (${firsts.filter((f) => f.status === "complete").length} complete)`);
    // Before: the stack warmed up (a first backup has run), nothing of the load running yet.
    await new Promise((r) => setTimeout(r, 3000));
    const before = sampler.now("before");
    log(`load: before — ${describeSample(before)}`);

    sampler.setPhase("backups+restores");
    const t1 = Date.now();
    const { outcomes: burst, targets } = await backupsAndRestores(api, stamp, sources, firsts, (r, n) => {
      sampler.setProgress(`${n}/${sources.length * 2} finished`);
      log(`load: ${r.kind} ${r.id} (${r.strategy}) ${r.status} in ${(r.ms / 1000).toFixed(1)} s${r.error ? `: ${r.error}` : ""}`);
    });
    const burstMs = Date.now() - t1;

    sampler.setPhase("matrix");
    const t2 = Date.now();
    let matrix: MatrixOutcome | null = null;
    try {
      matrix = await runMatrix(api, LOAD_SHAPE.matrix, (p) => sampler.setProgress(`${p.done}/${p.total} runs, ${p.failed} failed, sent ${p.sent}`));
    } catch (e) {
      log(`load: the matrix failed to run: ${e instanceof Error ? e.message : String(e)}`);
    }
    const matrixMs = Date.now() - t2;
    const matrixSamples = sampler.samples.filter((x) => x.phase === "matrix");

    sampler.setPhase("after");
    const t3 = Date.now();
    const cleanupErrors = await endSandboxes(api, [...targets, ...sources]);
    let after = sampler.now("after");
    while (Date.now() - t3 < SETTLE_MS && !(fdsBack(before, after) && after.mounts === before.mounts)) {
      await new Promise((r) => setTimeout(r, 2000));
      after = sampler.now("after");
    }
    sampler.stop();
    log(`load: after — ${describeSample(after)}`);
    const settleMs = Date.now() - t3;

    const results: LoadResults = {
      machine: machineDescription(info.apiUrl), startedAt, shape: LOAD_SHAPE,
      durations: { prepareMs, burstMs, matrixMs, settleMs, totalMs: Date.now() - t0 },
      firsts, burst, matrix, readings: { before, after }, samples: sampler.samples,
      verdicts: judge({ firsts, burst, matrix, matrixSamples, before, after, cleanupErrors }),
    };
    const stem = writeLoadResults(results, o.out ?? join(PROJECT, "results"));
    console.log(loadMarkdown(results));
    log(`load: wrote ${stem}.{json,md}`);
    return results.verdicts.ok ? 0 : 1;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await stopOwn();
  }
}

#!/usr/bin/env node
// snapflow: the command line over the HTTP API. `npx snapflow --help`; the commands and their flags are data in
// cli/cli-commands.ts, parsed by cli/cli-args.ts; what a run prints for a person is cli/run-lines.ts.
import { join, relative } from "node:path";
import { MATRIX_PRESETS } from "../src/matrix/presets.ts";
import { STRATEGIES } from "../src/strategies/registry.ts";
import { apiClient, ApiCallError, type RunStatus } from "./cli/api-client.ts";
import { apiErrorLine } from "./cli/api-error-line.ts";
import { parseCommandLine, usageLine } from "./cli/cli-args.ts";
import { commandHelp, globalHelp } from "./cli/cli-commands.ts";
import { didYouMean } from "./cli/did-you-mean.ts";
import { findRunningStack, stackDir } from "./stack/stack.ts";
import { reportFromFile, runBench, runReport } from "./bench/matrix-bench.ts";
import type { SleepWakeSleep } from "./bench/sleep-wake/run-sleep-wake.ts";
import { deleteCommand, gcCommand, labelsFromFlags, policyCommand, retentionCommand, snapshotsCommand } from "./cli/lifecycle-commands.ts";
import { backupResultLine, failureLine, restoreResultLine, stepLine, type SnapshotFacts } from "./cli/run-lines.ts";

const parsed = parseCommandLine(process.argv.slice(2));
if (parsed.kind === "help") {
  console.log(parsed.command ? commandHelp(parsed.command) : globalHelp());
  process.exit(0);
}
if (parsed.kind === "usage") {
  console.error(parsed.message);
  process.exit(2);
}
const { command, values, rest } = parsed;
const usage = (message: string, hint?: string): never => {
  console.error(usageLine(command, message, hint));
  process.exit(2);
};

// Usage errors first, so that they exit 2 whether or not an API is reachable.
if (values.strategy && (command === "backup" || command === "restore")) {
  const s = STRATEGIES.find((x) => x.name === values.strategy);
  const names = STRATEGIES.filter((x) => x.kind === command).map((x) => x.name);
  const listed = "see: npx snapflow strategies";
  if (s && s.kind !== command) usage(`--strategy: ${s.name} is a ${s.kind} strategy, not a ${command} one${didYouMean(values.strategy, names)}`, listed);
  if (!s) usage(`--strategy: no ${command} strategy '${values.strategy}'${didYouMean(values.strategy, names)}`, listed);
}
const PRESETS = [...Object.keys(MATRIX_PRESETS), "peers", "forks", "sleep-wake"];
if (command === "bench" && values.preset !== undefined && !PRESETS.includes(values.preset)) usage(`--preset: no preset '${values.preset}'${didYouMean(values.preset, PRESETS)}`, `one of ${PRESETS.join(", ")}`);
if (command === "report" && values.from) {
  // A peers race's results (they have datasets, not a matrix summary) are rewritten by their own writer.
  const { rewritePeersResults } = await import("./bench/peers/report.ts");
  process.exit(rewritePeersResults(values.from, values.out) ?? reportFromFile(values.from, values.out));
}
if (values.preset && values.spec) usage("give --preset or --spec, not both");
if (command === "bench" && values.preset === "peers") {
  // The race starts its own private stack and reads sandboxes on this host: no API to find first.
  const { runPeers, PEERS_DEFAULTS } = await import("./bench/peers/run-peers.ts");
  const count = (flag: "runs" | "files" | "bytes", fallback: number) => {
    const n = values[flag] === undefined ? fallback : Number(values[flag]);
    return Number.isInteger(n) && n > 0 ? n : usage(`--${flag} must be a positive integer`);
  };
  const dataset = values.dataset ?? "all";
  if (!["all", "npm-workspace", "node-modules"].includes(dataset)) usage(`--dataset: one of npm-workspace, node-modules, all (not '${dataset}')`);
  process.exit(await runPeers({
    ...PEERS_DEFAULTS,
    runs: count("runs", PEERS_DEFAULTS.runs), files: count("files", PEERS_DEFAULTS.files), bytes: count("bytes", PEERS_DEFAULTS.bytes),
    datasets: dataset === "all" ? PEERS_DEFAULTS.datasets : [dataset as "npm-workspace" | "node-modules"],
    name: values.name ?? PEERS_DEFAULTS.name, out: values.out ?? PEERS_DEFAULTS.out,
  }));
}

if (command === "bench" && values.preset === "forks") {
  // Issue 10's figures: first use, lazy restores beside download-then-mount, and forks; a private stack, as peers.
  const { runForks, FORKS_DEFAULTS } = await import("./bench/forks/run-forks.ts");
  const dataset = values.dataset ?? "all";
  if (!["all", "npm-workspace", "added-data"].includes(dataset)) usage(`--dataset: one of npm-workspace, added-data, all (not '${dataset}')`);
  const forks = values.runs === undefined ? FORKS_DEFAULTS.forks : Number(values.runs);
  if (!Number.isInteger(forks) || forks < 0) usage("--runs (the number of forks) must be a whole number");
  const added = values.bytes === undefined ? FORKS_DEFAULTS.addedBytes : Number(values.bytes);
  if (!Number.isInteger(added) || added <= 0) usage("--bytes (added-data's added bytes) must be a positive integer");
  process.exit(await runForks({
    ...FORKS_DEFAULTS, forks, addedBytes: added,
    datasets: dataset === "all" ? FORKS_DEFAULTS.datasets : [dataset as "npm-workspace" | "added-data"],
    name: values.name ?? FORKS_DEFAULTS.name, out: values.out ?? FORKS_DEFAULTS.out,
  }));
}

if (command === "bench" && values.preset === "sleep-wake") {
  // Issue 24's sleep/wake cycles on a private stack: layered wakes, sleeps of what changed since, the chain's depth.
  const { runSleepWake, SLEEP_WAKE_DEFAULTS, SLEEPS } = await import("./bench/sleep-wake/run-sleep-wake.ts");
  const dataset = values.dataset ?? SLEEP_WAKE_DEFAULTS.dataset;
  if (!["npm-workspace", "node-modules"].includes(dataset)) usage(`--dataset: one of npm-workspace, node-modules (not '${dataset}')`);
  const base = values.base ?? SLEEP_WAKE_DEFAULTS.base;
  if (!["squashfs-chunked", "files-cas"].includes(base)) usage(`--base: one of squashfs-chunked, files-cas (not '${base}')`);
  const sleep = values.sleep ?? SLEEP_WAKE_DEFAULTS.sleep;
  if (!(SLEEPS as readonly string[]).includes(sleep)) usage(`--sleep: one of ${SLEEPS.join(", ")} (not '${sleep}')`);
  if (sleep === "files-cas" && base !== "files-cas") usage("--sleep files-cas needs --base files-cas (its sleeps are layers of a file-level index)");
  const whole = (v: string | undefined, fallback: number, flag: string, min: number) => {
    const n = v === undefined ? fallback : Number(v);
    if (!Number.isInteger(n) || n < min) usage(`${flag} must be a whole number of at least ${min}`);
    return n;
  };
  process.exit(await runSleepWake({
    ...SLEEP_WAKE_DEFAULTS, dataset: dataset as "npm-workspace" | "node-modules",
    cycles: whole(values.cycles, SLEEP_WAKE_DEFAULTS.cycles, "--cycles", 1),
    changeBytes: whole(values.bytes, SLEEP_WAKE_DEFAULTS.changeBytes, "--bytes", 0),
    files: whole(values.files, SLEEP_WAKE_DEFAULTS.files, "--files", 1),
    name: values.name ?? `sleep-wake-${dataset}${base === "files-cas" ? "-files" : ""}`, out: values.out ?? SLEEP_WAKE_DEFAULTS.out,
    compactAfter: whole(values["compact-after"], SLEEP_WAKE_DEFAULTS.compactAfter, "--compact-after", 1),
    base: base as "squashfs-chunked" | "files-cas", sleep: sleep as SleepWakeSleep,
  }));
}

if (command === "load") {
  // It finds the running stack itself (it needs its process ids), or starts its own.
  const { runLoad } = await import("./bench/load/run-load.ts");
  process.exit(await runLoad({ out: values.out }));
}

const local = await findRunningStack();
const url = values.url ?? process.env.SNAPFLOW_URL ?? local?.apiUrl;
const token = values.token ?? process.env.SNAPFLOW_TOKEN ?? local?.apiToken;
if (!url || !token) {
  console.error("snapflow: no API to talk to: start the local stack (npm run dev) or pass --url and --token");
  process.exit(3);
}
const api = apiClient(url, token);
const print = (x: unknown) => console.log(JSON.stringify(x, null, 2));
const say = (line: string) => console.error(line);
/** Where a sandbox path is on this host, when the API is the local stack (its sandboxes are directories here). */
const hostPath = (sandbox: string, path: string) => (local && url === local.apiUrl ? relative(process.cwd(), join(stackDir({}), "sandboxes", sandbox)) + path : undefined);

// Ctrl-C while a run is watched stops the watching, not the run: say how to find it again or stop it.
let watching: { kind: "backup" | "restore" | "matrix"; id: string } | undefined;
process.on("SIGINT", () => {
  if (watching) {
    say(`\nsnapflow ${command}: stopped following; ${watching.kind} ${watching.id} goes on.`);
    say(`  follow it:  npx snapflow status ${watching.id} --follow`);
    // (A matrix has no cancel: its queued runs are sent as earlier ones finish.)
    if (watching.kind !== "matrix") say(`  cancel it:  npx snapflow cancel ${watching.id}`);
  }
  process.exit(130);
});

/**
 * Follows a run to its end: a line per step (stderr), then the result or failure line, or --json's status.
 * `where` is known when this command started the run; `status --follow` knows the id alone.
 */
async function follow(kind: "backup" | "restore", id: string, where?: { sandbox: string; path: string }): Promise<number> {
  watching = { kind, id };
  const s = await api.waitFor(kind, id, (name, step) => say(stepLine(kind, name, step)));
  watching = undefined;
  if (values.json) return print(s), s.status === "complete" ? 0 : 1;
  if (s.status !== "complete") {
    say(failureLine(kind, s, where));
    return 1;
  }
  if (kind === "backup") {
    const snap = await api.call<SnapshotFacts & { source: { path: string } }>("GET", `/api/snapshots/${id}`);
    console.log(backupResultLine(s, snap, where ?? snap.source));
  } else console.log(restoreResultLine(s, where && { ...where, hostPath: hostPath(where.sandbox, where.path) }));
  return 0;
}

/** Follows a matrix to its end: a line each time its progress moves; exit 1 when a run failed or was dead-lettered. */
async function followMatrix(id: string): Promise<number> {
  watching = { kind: "matrix", id };
  type View = { progress: { total: number; done: number; failed: number; status: string; deadLettered: unknown[] } | null };
  let last = "";
  for (;;) {
    const v = await api.call<View>("GET", `/api/matrices/${id}`);
    const p = v.progress;
    const line = p ? `  ${p.done} of ${p.total} runs done, ${p.failed} failed${p.deadLettered.length ? `, ${p.deadLettered.length} dead-lettered` : ""}` : "  starting";
    if (line !== last) say(line);
    last = line;
    if (p?.status === "complete") {
      watching = undefined;
      if (values.json) print(v);
      else console.log(`matrix ${id}: complete, ${p.done} runs, ${p.failed} failed (npx snapflow report ${id} writes its results files)`);
      return p.failed || p.deadLettered.length ? 1 : 0;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

interface StrategyView { name: string; kind: string; description: string; default?: boolean; defaultFor?: string[]; available?: boolean; reason?: string }

async function main(): Promise<number> {
  switch (command) {
    case "strategies": {
      const r = await api.call<{ strategies: StrategyView[] }>("GET", `/api/strategies${values.sandbox ? `?sandboxId=${encodeURIComponent(values.sandbox)}` : ""}`);
      if (values.json) return print(r), 0;
      const width = Math.max(...r.strategies.map((s) => s.name.length));
      for (const kind of ["backup", "restore"]) {
        console.log(kind === "backup" ? "backup strategies (* the default, when --strategy is left out):" : "\nrestore strategies (* the default for the snapshots named, when --strategy is left out):");
        for (const s of r.strategies.filter((x) => x.kind === kind)) {
          const state = s.available === undefined ? "" : s.available ? "" : `  UNAVAILABLE here: ${s.reason}`;
          const mark = s.default || s.defaultFor ? "*" : " ";
          console.log(`${mark} ${s.name.padEnd(width)}  ${s.description}${s.defaultFor ? ` [default for ${s.defaultFor.join(", ")}]` : ""}${state}`);
        }
      }
      return 0;
    }
    case "backup": {
      const where = { sandbox: values.sandbox!, path: values.path ?? "/workspace" };
      const b = await api.startBackup({ sandboxId: where.sandbox, path: where.path, ...(values.strategy ? { strategy: values.strategy } : {}), ...(values.base ? { baseSnapshotId: values.base } : {}),
        ...(values.name ? { name: values.name } : {}), ...(values.label ? { labels: labelsFromFlags(values.label, usage) } : {}),
        ...(values.ttl ? { ttl: /^\d+$/.test(values.ttl) ? Number(values.ttl) : values.ttl } : {}),
        ...(values.exclude ? { excludes: values.exclude } : {}), ...(values.gitignore ? { gitignore: true } : {}), ...(values["exclude-caches"] ? { excludeCaches: true } : {}) });
      if (values["no-wait"]) return values.json ? print(b) : console.log(`backup ${b.id} started (${b.strategy}): npx snapflow status ${b.id} --follow to follow it, npx snapflow cancel ${b.id} to stop it`), 0;
      say(`backup ${b.id} of ${where.sandbox}:${where.path} with ${b.strategy}`);
      return follow("backup", b.id, where);
    }
    case "restore": {
      const where = { sandbox: values.sandbox!, path: values.path ?? "/workspace" };
      const r = await api.startRestore({ snapshotId: values.snapshot!, sandboxId: where.sandbox, path: where.path, ...(values.strategy ? { strategy: values.strategy } : {}), ...(values.replace ? { replace: true } : {}), ...(values["keep-ownership"] ? { keepOwnership: true } : {}), ...(values["deep-verify"] ? { deepVerify: true } : {}) });
      if (values["no-wait"]) return values.json ? print(r) : console.log(`restore ${r.id} started (${r.strategy}): npx snapflow status ${r.id} --follow to follow it, npx snapflow cancel ${r.id} to stop it`), 0;
      say(`restore ${r.id} of ${values.snapshot} into ${where.sandbox}:${where.path} with ${r.strategy}`);
      return follow("restore", r.id, where);
    }
    case "status": {
      const id = rest[0]!;
      const kind = id.startsWith("bk-") ? "backup" : id.startsWith("rs-") ? "restore" : undefined;
      if (values.follow) {
        if (kind) say(`${kind} ${id}: following until it ends (Ctrl-C stops following, not the ${kind})`);
        return kind ? follow(kind, id) : followMatrix(id);
      }
      const s = await api.call<RunStatus>("GET", kind ? `/api/${kind}s/${id}` : `/api/matrices/${id}`);
      if (values.json || !kind) return print(s), 0;
      console.log(`${kind} ${id}${s.strategy ? ` (${s.strategy})` : ""}: ${s.status}`);
      for (const [name, step] of Object.entries(s.steps)) console.log(stepLine(kind, name, step));
      for (const note of s.interrupted ?? []) console.log(`  ${note}`);
      if (s.status === "complete" && kind === "backup") {
        const snap = await api.call<SnapshotFacts & { source: { path: string } }>("GET", `/api/snapshots/${id}`).catch(() => null);
        if (snap) console.log(backupResultLine(s, snap, snap.source));
      } else if (s.status !== "complete" && ["errored", "terminated", "cancelled"].includes(s.status)) {
        console.log(failureLine(kind, s));
      } else if (s.status !== "complete") {
        console.log(`still going: npx snapflow status ${id} --follow to follow it, npx snapflow cancel ${id} to stop it`);
      }
      return 0;
    }
    case "cancel": {
      const r = await api.call<{ id: string; kind: string; stoppedAt: string; cleanup: string }>("POST", `/api/runs/${encodeURIComponent(rest[0]!)}/cancel`);
      if (values.json) return print(r), 0;
      console.log(`${r.kind} ${r.id} cancelled at ${r.stoppedAt}: ${r.cleanup}`);
      return 0;
    }
    case "doctor": {
      // ✓ passed, ✗ failed (exit 1), ! an advisory check failed (snapflow guards it itself), – not run here.
      const r = await api.call<{ ok: boolean; ms: number; checks: { check: string; ok: boolean; detail: string; ifMissing: string; fix?: string; ms: number; skipped?: string; advisory?: boolean }[] }>("POST", "/api/doctor");
      if (values.json) return print(r), r.ok ? 0 : 1;
      for (const c of r.checks) {
        const mark = c.skipped ? "–" : c.ok ? "✓" : c.advisory ? "!" : "✗";
        const failed = !c.ok && !c.skipped;
        console.log(`${mark} ${c.check}  (${c.ms} ms)\n    ${c.skipped ? `not run: ${c.skipped}` : c.detail}${c.ok && !c.skipped ? "" : `\n    if missing: ${c.ifMissing}`}${failed && c.fix ? `\n    fix: ${c.fix}` : ""}`);
      }
      console.log(`\n${r.ok ? "all checks passed" : `${r.checks.filter((c) => !c.ok && !c.advisory).length} check(s) failed`} in ${(r.ms / 1000).toFixed(1)} s`);
      return r.ok ? 0 : 1;
    }
    case "snapshots":
      return snapshotsCommand(api, values);
    case "delete":
      return deleteCommand(api, rest[0]!, values.cascade ?? false);
    case "policy":
      return policyCommand(api, values, usage);
    case "retention":
      return retentionCommand(api, values.json ?? false);
    case "gc":
      return gcCommand(api, values, usage);
    case "report":
      return runReport(api, rest[0]!, { url: url!, out: values.out });
    case "bench":
      return runBench(api, { preset: values.preset, spec: values.spec, name: values.name, runs: values.runs, out: values.out, url: url! }, usage);
    case "help": case "load":
      return 0; // handled before an API is needed
  }
}

try {
  process.exit(await main());
} catch (e) {
  if (e instanceof ApiCallError) {
    // One line naming the CLI's own flags (--replace), not the API's body fields (replace: true).
    console.error(apiErrorLine(command, { message: e.message, field: e.field }));
    process.exit(e.status >= 400 && e.status < 500 ? 2 : 1);
  }
  if (e instanceof TypeError && /fetch failed/.test(e.message)) {
    console.error(`snapflow: cannot reach the API at ${url}: ${(e.cause as Error | undefined)?.message ?? e.message}`);
    process.exit(3);
  }
  throw e;
}

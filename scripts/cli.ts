#!/usr/bin/env node
// snapflow: the command line over the HTTP API. `npx snapflow --help`.
import { parseArgs } from "node:util";
import { apiClient, ApiCallError } from "./lib/api-client.ts";
import { apiErrorLine } from "./lib/api-error-line.ts";
import { findRunningStack } from "./lib/stack.ts";
import { reportFromFile, runBench, runReport } from "./lib/bench.ts";
import { deleteCommand, gcCommand, labelsFromFlags, policyCommand, retentionCommand, snapshotsCommand } from "./lib/lifecycle-commands.ts";

const HELP = `snapflow — snapshot and restore sandbox workspaces, and benchmark every way of doing it

Usage: npx snapflow <command> [options]

Commands:
  strategies [--sandbox ID]                     list presets; with a sandbox, which can run there and why not
  backup --sandbox ID [--path P] [--strategy S] [--base SNAPSHOT] [--name N] [--label K=V]... [--ttl 3d]
         [--exclude GLOB]... [--gitignore] [--exclude-caches] [--no-wait]
                                                back up a directory of a sandbox (default /workspace), named and
                                                labelled; --ttl: deleted by the cron trigger after that long;
                                                leaving out globs (*.log, node_modules/, /dist), what git ignores,
                                                and directories tagged with a CACHEDIR.TAG
  snapshots [--sandbox ID] [--path P] [--label K=V]... [--since T] [--until T] [--name N] [--limit N]
            [--cursor C] [--json]               list snapshots as a table (oldest first); T is an ISO date or a
                                                duration ago (90m, 3d); --label may repeat (all must match)
  delete ID [--cascade]                         delete a snapshot (archive, manifest, record, index entry);
                                                refused while deltas build on it unless --cascade (deletes them
                                                first), and while a restore reads it
  policy [--sandbox ID [--path P]] [--keep-last N] [--keep-daily N] [--keep-weekly N] [--delete] [--json]
                                                set a retention policy (restic forget's rules) for a sandbox path,
                                                delete it, or show policies; applied by the hourly cron trigger
  retention [--json]                            what the last cron run removed and kept, and why
  gc [--grace-seconds N] [--dry-run] [--json]   delete chunks no snapshot's index references, written more than
                                                N seconds ago (default a day); the hourly cron trigger runs it too
  restore --snapshot ID --sandbox ID [--path P] [--strategy S] [--replace] [--keep-ownership] [--deep-verify] [--no-wait]
                                                restore a snapshot into a sandbox; --keep-ownership restores owners
                                                and setuid/setgid bits as archived (off: the agent's user, bits cleared);
                                                --deep-verify hashes every restored file against the manifest
  status ID                                     a backup (bk-…), restore (rs-…) or matrix (mx-…, nightly-…)
  doctor [--json]                               check the deployment end to end (bindings, secrets, the store's
                                                checksum behaviours, the sandbox's tools and kernel, a 10 MB
                                                backup and restore); exit 1 when a check fails
  report ID [--out DIR]                         rebuild a matrix's summary from its stored runs and write its
                                                results files again
  report --from FILE.json [--out DIR]           rewrite a results file's .md and .svg from its .json (offline;
                                                a matrix's or a peers race's)
  bench [--preset smoke|seeds | --spec FILE] [--name N] [--runs N] [--out DIR]
                                                run a benchmark matrix, show progress, print the summary, and
                                                write results/<date>-<name>.{json,md,svg} with the machine description
  bench --preset peers [--dataset npm-workspace|node-modules|all] [--runs N] [--files N --bytes N]
        [--name N] [--out DIR]
                                                the standing race against the floors and restic: on one tree, N
                                                runs (default 3) of tar|zstd to a file and | rclone rcat into the
                                                store, rclone cat|zstd -d|tar x; restic first backup, after a 10 MB
                                                change, restore; snapflow's default backup, 10 MB incremental,
                                                default restore and fastest mount restore. Starts its own private
                                                stack (no npm run dev needed; stop other load first). --files/--bytes
                                                size the generated node-modules tree (default 34500 / 692000000).
                                                Writes results/<date>-peers.{json,md,svg} with medians and ratios.
  bench --preset forks [--dataset npm-workspace|added-data|all] [--runs N] [--bytes N]
                                                Issue 10's race on a private stack: a lazy restore's usable moment,
                                                first use (node -e "require('typescript')") and bytes fetched by then,
                                                complete, beside download-then-mount; N forks (default 10) each
                                                restored writable, changed 10 MB and backed up (bytes uploaded, time);
                                                the chunk store against N + 1 full archives. --bytes: added-data's
                                                added bytes (default 5 GB). Writes results/<date>-forks.{json,md}.
  load [--out DIR]                              the stack under load, watched for leaks: 8 backups and 8 restores at
                                                once, then a 100-run matrix of small cells; samples workerd's and the
                                                agent's memory and descriptors and the mounts, and writes
                                                results/<date>-load.{json,md}. Uses the running stack (npm run dev) or
                                                starts a private one. Exit 1 when a criterion fails.

Options:
  --url URL      the API (default: the local stack in .snapflow/stack.json, or $SNAPFLOW_URL)
  --token T      the API token (default: the local stack's, or $SNAPFLOW_TOKEN)
  -h, --help     this help

Exit codes: 0 success; 1 the run failed (or a matrix had failures); 2 bad usage or input refused; 3 no API reachable.`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: "string" }, token: { type: "string" }, help: { type: "boolean", short: "h" },
    sandbox: { type: "string" }, path: { type: "string" }, strategy: { type: "string" }, base: { type: "string" },
    snapshot: { type: "string" }, replace: { type: "boolean" }, "keep-ownership": { type: "boolean" }, "deep-verify": { type: "boolean" }, "no-wait": { type: "boolean" },
    label: { type: "string", multiple: true }, ttl: { type: "string" }, since: { type: "string" }, until: { type: "string" },
    limit: { type: "string" }, cursor: { type: "string" }, json: { type: "boolean" }, cascade: { type: "boolean" }, delete: { type: "boolean" },
    "keep-last": { type: "string" }, "grace-seconds": { type: "string" }, "dry-run": { type: "boolean" }, "keep-daily": { type: "string" }, "keep-weekly": { type: "string" },
    exclude: { type: "string", multiple: true }, gitignore: { type: "boolean" }, "exclude-caches": { type: "boolean" },
    preset: { type: "string" }, spec: { type: "string" }, dataset: { type: "string" }, files: { type: "string" }, bytes: { type: "string" }, from: { type: "string" }, name: { type: "string" }, runs: { type: "string" }, out: { type: "string" },
  },
});

const [command, ...rest] = positionals;
if (values.help || !command) {
  console.log(HELP);
  process.exit(command || values.help ? 0 : 2);
}
const usage = (message: string): never => {
  console.error(`snapflow ${command}: ${message}\n(see npx snapflow --help)`);
  process.exit(2);
};

// Usage errors first, so that they exit 2 whether or not an API is reachable.
const required: Record<string, [keyof typeof values, string][]> = {
  backup: [["sandbox", "--sandbox is required"]],
  restore: [["snapshot", "--snapshot is required"], ["sandbox", "--sandbox is required"]],
};
if (!["strategies", "backup", "restore", "status", "doctor", "bench", "report", "snapshots", "delete", "policy", "retention", "gc", "load"].includes(command)) usage(`unknown command '${command}'`);
for (const [key, message] of required[command] ?? []) if (!values[key]) usage(message);
if ((command === "status" || command === "delete" || (command === "report" && !values.from)) && !rest[0]) usage(`${command} needs an id`);
if (command === "report" && values.from) {
  // A peers race's results (they have datasets, not a matrix summary) are rewritten by their own writer.
  const { rewritePeersResults } = await import("./lib/peers/report.ts");
  process.exit(rewritePeersResults(values.from, values.out) ?? reportFromFile(values.from, values.out));
}
if (values.preset && values.spec) usage("give --preset or --spec, not both");
if (command === "bench" && values.preset === "peers") {
  // The race starts its own private stack and reads sandboxes on this host: no API to find first.
  const { runPeers, PEERS_DEFAULTS } = await import("./lib/peers/run-peers.ts");
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
  const { runForks, FORKS_DEFAULTS } = await import("./lib/forks/run-forks.ts");
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

if (command === "load") {
  // It finds the running stack itself (it needs its process ids), or starts its own.
  const { runLoad } = await import("./lib/load/run-load.ts");
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
const printSteps = (kind: string) => (name: string, s: { ms: number; bytes: number }) =>
  console.error(`  ${kind} ${name.padEnd(11)} ${String(s.ms).padStart(7)} ms${s.bytes ? ` ${(s.bytes / 1e6).toFixed(1)} MB` : ""}`);

async function main(): Promise<number> {
  switch (command) {
    case "strategies": {
      const r = await api.call<{ strategies: { name: string; kind: string; available?: boolean; reason?: string; description: string }[] }>(
        "GET", `/api/strategies${values.sandbox ? `?sandboxId=${encodeURIComponent(values.sandbox)}` : ""}`);
      for (const s of r.strategies) {
        const state = s.available === undefined ? "" : s.available ? "  available" : `  UNAVAILABLE: ${s.reason}`;
        console.log(`${s.kind.padEnd(8)} ${s.name.padEnd(34)}${state}\n         ${s.description}`);
      }
      return 0;
    }
    case "backup": {
      const b = await api.startBackup({ sandboxId: values.sandbox!, path: values.path ?? "/workspace", ...(values.strategy ? { strategy: values.strategy } : {}), ...(values.base ? { baseSnapshotId: values.base } : {}),
        ...(values.name ? { name: values.name } : {}), ...(values.label ? { labels: labelsFromFlags(values.label, usage) } : {}),
        ...(values.ttl ? { ttl: /^\d+$/.test(values.ttl) ? Number(values.ttl) : values.ttl } : {}),
        ...(values.exclude ? { excludes: values.exclude } : {}), ...(values.gitignore ? { gitignore: true } : {}), ...(values["exclude-caches"] ? { excludeCaches: true } : {}) });
      console.error(`backup ${b.id} (${b.strategy}) started`);
      if (values["no-wait"]) return print(b), 0;
      const s = await api.waitFor("backup", b.id, printSteps("backup"));
      print(s);
      return s.status === "complete" ? 0 : 1;
    }
    case "restore": {
      const r = await api.startRestore({ snapshotId: values.snapshot!, sandboxId: values.sandbox!, path: values.path ?? "/workspace", ...(values.strategy ? { strategy: values.strategy } : {}), ...(values.replace ? { replace: true } : {}), ...(values["keep-ownership"] ? { keepOwnership: true } : {}), ...(values["deep-verify"] ? { deepVerify: true } : {}) });
      console.error(`restore ${r.id} (${r.strategy}) started`);
      if (values["no-wait"]) return print(r), 0;
      const s = await api.waitFor("restore", r.id, printSteps("restore"));
      print(s);
      return s.status === "complete" ? 0 : 1;
    }
    case "status": {
      const id = rest[0]!;
      const path = id.startsWith("bk-") ? `/api/backups/${id}` : id.startsWith("rs-") ? `/api/restores/${id}` : `/api/matrices/${id}`;
      print(await api.call("GET", path));
      return 0;
    }
    case "doctor": {
      // ✓ passed, ✗ failed (exit 1), ! an advisory check failed (snapflow guards it itself), – not run here.
      const r = await api.call<{ ok: boolean; ms: number; checks: { check: string; ok: boolean; detail: string; ifMissing: string; ms: number; skipped?: string; advisory?: boolean }[] }>("POST", "/api/doctor");
      if (values.json) return print(r), r.ok ? 0 : 1;
      for (const c of r.checks) {
        const mark = c.skipped ? "–" : c.ok ? "✓" : c.advisory ? "!" : "✗";
        console.log(`${mark} ${c.check}  (${c.ms} ms)\n    ${c.skipped ? `not run: ${c.skipped}` : c.detail}${c.ok && !c.skipped ? "" : `\n    if missing: ${c.ifMissing}`}`);
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
    default:
      return usage(`unknown command '${command}'`);
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

#!/usr/bin/env node
// snapflow: the command line over the HTTP API. `npx snapflow --help`.
import { parseArgs } from "node:util";
import { apiClient, ApiCallError } from "./lib/api-client.ts";
import { findRunningStack } from "./lib/stack.ts";
import { reportFromFile, runBench, runReport } from "./lib/bench.ts";

const HELP = `snapflow — snapshot and restore sandbox workspaces, and benchmark every way of doing it

Usage: npx snapflow <command> [options]

Commands:
  strategies [--sandbox ID]                     list presets; with a sandbox, which can run there and why not
  backup --sandbox ID [--path P] [--strategy S] [--base SNAPSHOT] [--no-wait]
                                                back up a directory of a sandbox (default /workspace)
  restore --snapshot ID --sandbox ID [--path P] [--strategy S] [--replace] [--no-wait]
                                                restore a snapshot into a sandbox
  status ID                                     a backup (bk-…), restore (rs-…) or matrix (mx-…, nightly-…)
  report ID [--out DIR]                         rebuild a matrix's summary from its stored runs and write its
                                                results files again
  report --from FILE.json [--out DIR]           rewrite a results file's .md and .svg from its .json (offline)
  bench [--preset smoke|seeds | --spec FILE] [--name N] [--runs N] [--out DIR]
                                                run a benchmark matrix, show progress, print the summary, and
                                                write results/<date>-<name>.{json,md,svg} with the machine description

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
    snapshot: { type: "string" }, replace: { type: "boolean" }, "no-wait": { type: "boolean" },
    preset: { type: "string" }, spec: { type: "string" }, from: { type: "string" }, name: { type: "string" }, runs: { type: "string" }, out: { type: "string" },
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
if (!["strategies", "backup", "restore", "status", "bench", "report"].includes(command)) usage(`unknown command '${command}'`);
for (const [key, message] of required[command] ?? []) if (!values[key]) usage(message);
if ((command === "status" || (command === "report" && !values.from)) && !rest[0]) usage(`${command} needs an id`);
if (command === "report" && values.from) process.exit(reportFromFile(values.from, values.out));
if (values.preset && values.spec) usage("give --preset or --spec, not both");

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
      const b = await api.startBackup({ sandboxId: values.sandbox!, path: values.path ?? "/workspace", ...(values.strategy ? { strategy: values.strategy } : {}), ...(values.base ? { baseSnapshotId: values.base } : {}) });
      console.error(`backup ${b.id} (${b.strategy}) started`);
      if (values["no-wait"]) return print(b), 0;
      const s = await api.waitFor("backup", b.id, printSteps("backup"));
      print(s);
      return s.status === "complete" ? 0 : 1;
    }
    case "restore": {
      const r = await api.startRestore({ snapshotId: values.snapshot!, sandboxId: values.sandbox!, path: values.path ?? "/workspace", ...(values.strategy ? { strategy: values.strategy } : {}), ...(values.replace ? { replace: true } : {}) });
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
    console.error(`snapflow ${command}: ${e.message}${e.field ? ` (field ${e.field})` : ""}`);
    process.exit(e.status >= 400 && e.status < 500 ? 2 : 1);
  }
  if (e instanceof TypeError && /fetch failed/.test(e.message)) {
    console.error(`snapflow: cannot reach the API at ${url}: ${(e.cause as Error | undefined)?.message ?? e.message}`);
    process.exit(3);
  }
  throw e;
}

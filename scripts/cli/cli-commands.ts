// The CLI's commands as data: each one's usage, one-line summary, longer help and the flags it takes. The global
// help (`snapflow --help`) lists every command's usage and summary; `snapflow <command> --help` and `snapflow help
// <command>` print one command's help; the argument parser (cli-args.ts) accepts only the flags a command lists.
import type { ParseArgsConfig } from "node:util";

type Option = NonNullable<ParseArgsConfig["options"]>[string];

/** Every flag any command takes, as node:util parseArgs options. */
export const FLAGS = {
  url: { type: "string" }, token: { type: "string" }, help: { type: "boolean", short: "h" }, json: { type: "boolean" },
  sandbox: { type: "string" }, path: { type: "string" }, strategy: { type: "string" }, base: { type: "string" },
  snapshot: { type: "string" }, replace: { type: "boolean" }, "keep-ownership": { type: "boolean" }, "deep-verify": { type: "boolean" }, "no-wait": { type: "boolean" },
  follow: { type: "boolean", short: "f" }, label: { type: "string", multiple: true }, ttl: { type: "string" }, since: { type: "string" }, until: { type: "string" },
  limit: { type: "string" }, cursor: { type: "string" }, cascade: { type: "boolean" }, delete: { type: "boolean" },
  "keep-last": { type: "string" }, "grace-seconds": { type: "string" }, "dry-run": { type: "boolean" }, "keep-daily": { type: "string" }, "keep-weekly": { type: "string" },
  exclude: { type: "string", multiple: true }, gitignore: { type: "boolean" }, "exclude-caches": { type: "boolean" },
  preset: { type: "string" }, spec: { type: "string" }, dataset: { type: "string" }, files: { type: "string" }, bytes: { type: "string" }, from: { type: "string" }, name: { type: "string" }, runs: { type: "string" }, cycles: { type: "string" }, "compact-after": { type: "string" }, sleep: { type: "string" }, out: { type: "string" },
} as const satisfies Record<string, Option>;

export type Flag = keyof typeof FLAGS;

/** Flags every command takes. */
export const GLOBAL_FLAGS: readonly Flag[] = ["url", "token", "help"];

export interface Command {
  usage: string;
  summary: string;
  /** more lines for `snapflow help <command>` */
  details?: string;
  flags: readonly Flag[];
  /** it needs an id (or a command name) after it */
  needsId?: boolean;
  /** flags it cannot do without */
  required?: readonly Flag[];
}

export const COMMANDS = {
  strategies: {
    usage: "strategies [--sandbox ID] [--json]",
    summary: "list presets, the defaults marked; with a sandbox, which can run there and why not",
    details: "A backup with no --strategy runs the default backup; a restore with no --strategy runs the default restore\nfor its snapshot's format (marked with the formats it is the default for).",
    flags: ["sandbox", "json"],
  },
  backup: {
    usage: "backup --sandbox ID [--path P] [--strategy S] [--base SNAPSHOT] [--name N] [--label K=V]... [--ttl 3d]\n       [--exclude GLOB]... [--gitignore] [--exclude-caches] [--no-wait] [--json]",
    summary: "back up a directory of a sandbox (default /workspace)",
    details: `Prints a line per step as it finishes and a result line: the snapshot id, files, MB before → after, the time,
and the restore command to run. Ctrl-C stops watching, not the backup: it prints how to follow or cancel it.
  --path P          the directory to back up (default /workspace)
  --strategy S      a backup preset (snapflow strategies; default tar-zst-presigned-multipart)
  --base SNAPSHOT   for a delta strategy (tar-zst-delta, overlay-delta): the snapshot it is taken against
  --name N, --label K=V   name and label the snapshot (--label may repeat)
  --ttl 3d          deleted by the cron trigger after that long (seconds, or 90m, 12h, 3d)
  --exclude GLOB    leave out paths (*.log, node_modules/, /dist); may repeat
  --gitignore       leave out what git ignores; --exclude-caches: directories tagged with a CACHEDIR.TAG
  --no-wait         print the run's id and return at once (snapflow status ID --follow to follow it)
  --json            the run's full status as JSON instead of the lines (for scripts)`,
    flags: ["sandbox", "path", "strategy", "base", "name", "label", "ttl", "exclude", "gitignore", "exclude-caches", "no-wait", "json"],
    required: ["sandbox"],
  },
  restore: {
    usage: "restore --snapshot ID --sandbox ID [--path P] [--strategy S] [--replace] [--keep-ownership] [--deep-verify]\n        [--no-wait] [--json]",
    summary: "restore a snapshot into a sandbox",
    details: `Prints a line per step as it finishes and a result line: files, MB, the time until the tree was usable (a lazy
restore: before every byte is local) and complete, and where it went.
  --path P          where to restore (default /workspace); it must be empty unless --replace
  --strategy S      a restore preset (snapflow strategies; default: the presigned pipe for the snapshot's format)
  --replace         replace what is at --path (swapped out only once the new tree is verified)
  --keep-ownership  restore owners and setuid/setgid bits as archived (off: the agent's user, bits cleared)
  --deep-verify     hash every restored file against the manifest
  --no-wait, --json as for backup`,
    flags: ["snapshot", "sandbox", "path", "strategy", "replace", "keep-ownership", "deep-verify", "no-wait", "json"],
    required: ["snapshot", "sandbox"],
  },
  status: {
    usage: "status ID [-f|--follow] [--json]",
    summary: "a backup (bk-…), restore (rs-…) or matrix (mx-…, nightly-…): its steps so far and how it stands",
    details: `  -f, --follow      print each step (a matrix: its progress) as the run advances, until it ends; then the
                    result line, exit 0, or the failure line, exit 1. Ctrl-C stops following, not the run
                    (it prints how to cancel it)
  --json            the status as JSON (with --follow: once the run has ended)`,
    flags: ["follow", "json"],
    needsId: true,
  },
  doctor: {
    usage: "doctor [--json]",
    summary: "check a deployment end to end: the Worker and its bindings, the store's checksum and create-only behaviours, a sandbox's tools, a 10 MB round trip",
    details: "Prints one line per check (✓ passed, ✗ failed, ! advisory, – not run) with what snapflow does if the store or\nsandbox lacks it; exits 1 when a check that is not advisory fails (docs/production-parity.md).",
    flags: ["json"],
  },
  cancel: {
    usage: "cancel ID [--json]",
    summary: "stop a backup (bk-…) or restore (rs-…) and clean up after it",
    details: "A cancelled backup leaves nothing: no upload, no half snapshot, no staging file. A cancelled restore puts its\ntarget back as it was. A run that has already ended is refused (exit 2).",
    flags: ["json"],
    needsId: true,
  },
  snapshots: {
    usage: "snapshots [--sandbox ID] [--path P] [--label K=V]... [--since T] [--until T] [--name N] [--limit N] [--cursor C] [--json]",
    summary: "list snapshots as a table (oldest first)",
    details: "T is an ISO date or a duration ago (90m, 3d); --label may repeat (all must match).",
    flags: ["sandbox", "path", "label", "since", "until", "name", "limit", "cursor", "json"],
  },
  delete: {
    usage: "delete ID [--cascade]",
    summary: "delete a snapshot (archive, manifest, record, index entry)",
    details: "Refused while deltas build on it unless --cascade (deletes them first), and while a restore reads it.",
    flags: ["cascade"],
    needsId: true,
  },
  policy: {
    usage: "policy [--sandbox ID [--path P]] [--keep-last N] [--keep-daily N] [--keep-weekly N] [--delete] [--json]",
    summary: "set, delete or show a retention policy (restic forget's rules) for a sandbox path",
    details: "Applied by the hourly cron trigger.",
    flags: ["sandbox", "path", "keep-last", "keep-daily", "keep-weekly", "delete", "json"],
  },
  retention: {
    usage: "retention [--json]",
    summary: "what the last cron run removed and kept, and why",
    flags: ["json"],
  },
  gc: {
    usage: "gc [--grace-seconds N] [--dry-run] [--json]",
    summary: "delete chunks no snapshot's index references, written more than N seconds ago (default a day)",
    details: "The hourly cron trigger runs it too.",
    flags: ["grace-seconds", "dry-run", "json"],
  },
  report: {
    usage: "report ID [--out DIR]  |  report --from FILE.json [--out DIR]",
    summary: "rebuild a matrix's results files from its stored runs, or rewrite a results file's .md and .svg offline",
    flags: ["out", "from"],
  },
  bench: {
    usage: "bench [--preset smoke|seeds|seed-003|peers|forks|sleep-wake | --spec FILE] [--name N] [--runs N] [--out DIR]",
    summary: "run a benchmark matrix or race and write results/<name>.{json,md,svg} (the run it replaces moves to results/archive/)",
    details: `A matrix (a preset or --spec FILE) runs on the stack: progress, then the summary and the machine's description.
  --preset peers [--dataset npm-workspace|node-modules|all] [--runs N] [--files N --bytes N]
      the standing race against the floors and restic, on a private stack it starts (no npm run dev needed; stop
      other load first). --files/--bytes size the generated node-modules tree (default 34500 / 692000000).
  --preset forks [--dataset npm-workspace|added-data|all] [--runs N] [--bytes N]
      issue 10's race on a private stack: a lazy restore's usable moment, first use, forks, the chunk store.
      --runs: the number of forks (default 10); --bytes: added-data's added bytes (default 5 GB).
  --preset sleep-wake [--dataset npm-workspace|node-modules] [--base squashfs-chunked|files-cas] [--sleep overlay-delta|overlay-delta-put|files-cas] [--cycles N] [--bytes N] [--files N] [--compact-after N]
      issue 24's cycles on a private stack: a base (--base: a chunked image, the default, or file-level), then N
      times wake the latest snapshot (lazy-overlay-restore, or files-overlay-restore), first use, change (--bytes new, default 10 MB; an edit, a delete, a directory
      deleted and made again), sleep (overlay-delta). Each wake is compared with an independent walk (hashes
      included) of what slept: exit 1 on any difference. --cycles default 100; --files: node-modules' file count;
      --compact-after: a sleep this many deltas deep compacts its chain in the background (default 4; 8 MiB of deltas do too).
      --sleep: the sleep's preset: overlay-delta (the Worker relays the delta in parts, the default), overlay-delta-put
      (the sandbox stages it and PUTs it once), or files-cas (with --base files-cas: a layer of the woken snapshot's
      index holding what changed since the wake; wakes mount the index chain, no delta to extract, no compaction).`,
    flags: ["preset", "spec", "name", "runs", "cycles", "compact-after", "sleep", "base", "out", "dataset", "files", "bytes"],
  },
  load: {
    usage: "load [--out DIR]",
    summary: "the stack under load, watched for leaks; writes results/load.{json,md}",
    details: "8 backups and 8 restores at once, then a 100-run matrix of small cells; samples workerd's and the agent's\nmemory and descriptors and the mounts. Uses the running stack (npm run dev) or starts a private one.\nExit 1 when a criterion fails.",
    flags: ["out"],
  },
  help: {
    usage: "help [COMMAND]",
    summary: "this help, or one command's",
    flags: [],
  },
} as const satisfies Record<string, Command>;

export type CommandName = keyof typeof COMMANDS;
export const COMMAND_NAMES = Object.keys(COMMANDS) as CommandName[];
export const isCommand = (name: string): name is CommandName => Object.hasOwn(COMMANDS, name);

export const EXIT_CODES = `Exit codes: 0 done; 1 the run failed or was cancelled (or a matrix had failures); 2 bad usage, or the API
refused the request (it says which flag); 3 no API reachable; 130 interrupted by Ctrl-C (a backup or restore
goes on: the command says how to follow or cancel it).`;

const OPTIONS = `Options for every command:
  --url URL      the API (default: the local stack in .snapflow/stack.json, or $SNAPFLOW_URL)
  --token T      the API token (default: the local stack's, or $SNAPFLOW_TOKEN)
  -h, --help     help (snapflow <command> --help: that command's)`;

export function globalHelp(): string {
  const rows = COMMAND_NAMES.filter((n) => n !== "help").map((n) => `  ${n.padEnd(12)}${COMMANDS[n].summary}`);
  return `snapflow — snapshot and restore sandbox workspaces, and benchmark every way of doing it

Usage: npx snapflow <command> [options]      npx snapflow help <command>: one command's flags

Commands:
${rows.join("\n")}

${OPTIONS}

${EXIT_CODES}`;
}

export function commandHelp(name: CommandName): string {
  const c: Command = COMMANDS[name];
  return `Usage: npx snapflow ${c.usage}

${c.summary[0]!.toUpperCase()}${c.summary.slice(1)}.${c.details ? `\n${c.details}` : ""}

${OPTIONS}

${EXIT_CODES}`;
}

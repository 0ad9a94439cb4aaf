// The CLI as a person meets it before any API is involved: `scripts/cli.ts` run as a process (Node 22, as npx runs
// it), with no stack to talk to — usage errors are decided first and exit 2 whether or not an API is reachable.
import { spawnSync } from "node:child_process";
import { expect, it } from "vitest";
import { COMMAND_NAMES } from "../../scripts/cli/cli-commands.ts";
import { closest } from "../../scripts/cli/did-you-mean.ts";

const CLI = new URL("../../scripts/cli.ts", import.meta.url).pathname;

function snapflow(...args: string[]): { code: number | null; out: string; err: string } {
  // An API that is not there: a usage error must not need one.
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8", env: { ...process.env, SNAPFLOW_URL: "http://127.0.0.1:9", SNAPFLOW_TOKEN: "x" } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

it("each command has its own help, by --help and by help <command>, and they agree", () => {
  const global = snapflow("--help");
  expect(global.code).toBe(0);
  for (const name of COMMAND_NAMES.filter((n) => n !== "help")) {
    const own = snapflow(name, "--help");
    expect(own.code, name).toBe(0);
    expect(own.out, name).toMatch(new RegExp(`^Usage: npx snapflow ${name}`));
    expect(own.out, name).not.toBe(global.out);
    expect(snapflow("help", name).out, name).toBe(own.out);
    expect(global.out, name).toMatch(new RegExp(`\\n  ${name} +\\S`));
  }
  expect(snapflow("backup", "--help").out).toMatch(/--exclude GLOB/);
  expect(global.out).toMatch(/130 interrupted by Ctrl-C/);
});

it("a bad flag is one line naming the flag and the command's help, exit 2, no stack trace", () => {
  const cases: [string[], RegExp][] = [
    [["backup", "--sandbx", "a"], /^snapflow backup: unknown flag --sandbx; did you mean --sandbox\? \(see: npx snapflow help backup\)$/],
    [["backup", "--sandbox"], /^snapflow backup: --sandbox needs a value .*\(see: npx snapflow help backup\)$/],
    [["restore", "--snapshot", "x", "--sandbox", "y", "--exclude", "*.log"], /^snapflow restore: unknown flag --exclude; restore does not take it \(see: npx snapflow help restore\)$/],
    [["backup", "--sandbox", "a", "--gitignore=yes"], /^snapflow backup: --gitignore takes no value/],
    [["restore", "--sandbox", "a"], /^snapflow restore: --snapshot is required/],
    [["cancel"], /^snapflow cancel: cancel needs an id/],
    [["status", "bk-1", "bk-2"], /^snapflow status: unexpected 'bk-2'/],
  ];
  for (const [args, line] of cases) {
    const r = snapflow(...args);
    expect(r.code, args.join(" ")).toBe(2);
    expect(r.err.trim().split("\n"), args.join(" ")).toHaveLength(1);
    expect(r.err.trim(), args.join(" ")).toMatch(line);
    expect(r.err).not.toMatch(/ERR_PARSE_ARGS|\n\s+at /);
  }
});

it("did you mean: commands, strategies (of the right kind) and bench presets, peers, forks and sleep-wake among them", () => {
  expect(snapflow("bakup", "--sandbox", "a").err.trim()).toBe("snapflow: unknown command 'bakup'; did you mean backup? (see: npx snapflow --help)");
  expect(snapflow("help", "restor").err.trim()).toMatch(/no command 'restor'; did you mean restore\?/);
  const typo = snapflow("backup", "--sandbox", "a", "--strategy", "tar-zst-pip");
  expect(typo.code).toBe(2);
  expect(typo.err.trim()).toBe("snapflow backup: --strategy: no backup strategy 'tar-zst-pip'; did you mean tar-zst-pipe? (see: npx snapflow strategies)");
  expect(snapflow("backup", "--sandbox", "a", "--strategy", "presigned-tar-zst-pipe").err).toMatch(/presigned-tar-zst-pipe is a restore strategy, not a backup one/);
  expect(snapflow("restore", "--snapshot", "x", "--sandbox", "a", "--strategy", "lazy-squashfss").err).toMatch(/did you mean lazy-squashfs\?/);
  const preset = snapflow("bench", "--preset", "smok");
  expect(preset.code).toBe(2);
  expect(preset.err.trim()).toMatch(/^snapflow bench: --preset: no preset 'smok'; did you mean smoke\? \(one of smoke, seeds, .*peers, forks, sleep-wake\)$/);
  expect(snapflow("bench", "--preset", "forkz").err).toMatch(/did you mean forks\?/);
  expect(snapflow("bench", "--preset", "sleep-wak").err).toMatch(/did you mean sleep-wake\?/);
  // Far from everything: no guess.
  expect(closest("zzzzzzzz", ["backup", "restore"])).toBeUndefined();
  expect(closest("snap", ["snapshots", "status"])).toBe("snapshots");
});

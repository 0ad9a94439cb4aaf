// Selection: what a backup leaves out, compiled into one predicate over paths relative to the tree's root. Every
// walk of a tree (the list tar archives, an image's exclusions, a delta's comparison, a manifest) asks the same
// predicate, so every format leaves out exactly the same entries. A walk does not descend into an excluded
// directory: everything below it is excluded with it.
//
// Rules, in the order they are asked:
//   excludes       glob patterns, as .gitignore writes them (without negation): `*` and `?` within a name, `[…]`,
//                  `**` across directories; a pattern with no '/' but a trailing one matches a name at any depth
//                  (`*.log`, `node_modules/`), one with a '/' is anchored at the tree's root (`build/out`, `/dist`);
//                  a trailing '/' matches directories only
//   gitignore      git's own rules (.gitignore files, .git/info/exclude, core.excludesFile), by asking git:
//                  `git ls-files --others --ignored --exclude-standard --directory` inside a work tree, or with a
//                  scratch repository over the tree when it is not one. Without git: nothing is excluded by it,
//                  and the selection's warnings say so.
//   excludeCaches  a directory holding a CACHEDIR.TAG that begins with the standard signature
//                  (https://bford.info/cachedir/) is excluded whole, as borg does.
import { closeSync, openSync, readSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { AgentError } from "../http/agent-error.ts";
import { findOnPath } from "../system/find-on-path.ts";
import { SELECTION_HEADER, SelectionSpec, type SelectionRecord } from "../contract/protocol.ts";
import { startTool } from "../system/run-tool.ts";
import { walkAll } from "../manifest/tree-walk.ts";

export const CACHEDIR_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55";

/** Asked by a walk for each entry (relative path, whether it is a directory, its host path): excluded or not. */
export type Exclude = (rel: string, isDir: boolean, hostPath: string) => boolean;

export interface CompiledSelection {
  exclude: Exclude;
  /** the rules and what they excluded so far (distinct paths, so walking twice counts once) */
  record(): SelectionRecord;
  /** the same rules, compiled, for the native engine's walk (engine-pass.ts); undefined when it would not read them alike */
  engineRules(): EngineSelection | undefined;
}

/** The selection as the native engine takes it (native/lazy/internal/pack/selection.go). */
export interface EngineSelection {
  patterns: { pattern: string; re: string; dirOnly: boolean }[];
  ignored: string[];
  excludeCaches: boolean;
  /** the manifest's record less `excluded`, which the engine's walk counts */
  record: Omit<SelectionRecord, "excluded">;
}

/**
 * Whether Go's RE2 reads a globToRegExp expression as JavaScript does. They agree on everything globToRegExp writes
 * from ordinary globs; they part on POSIX classes inside a bracket (`[[:alpha:]]` is a class to RE2, not to
 * JavaScript) and on escaped letters (`\c`, `\k`, `\p` mean different things or nothing): such a selection stays
 * with the agent's own walk.
 */
export function readsAlikeInRE2(source: string): boolean {
  return !/\[[:=.]/.test(source) && !/\\[A-Za-z]/.test(source);
}

/** One glob pattern as a RegExp over a relative path, and whether it matches directories only. */
export function globToRegExp(pattern: string): { re: RegExp; dirOnly: boolean } {
  let p = pattern;
  const dirOnly = p.endsWith("/");
  if (dirOnly) p = p.replace(/\/+$/, "");
  // A '/' at the start or in the middle anchors the pattern at the root; otherwise it matches at any depth.
  const anchored = p.includes("/");
  p = p.replace(/^\/+/, "");
  let re = "";
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    if (ch === "*" && p[i + 1] === "*") {
      const slashAfter = p[i + 2] === "/";
      const atSegmentStart = i === 0 || p[i - 1] === "/";
      if (atSegmentStart && slashAfter) {
        re += "(?:.*/)?";
        i += 2;
      } else if (atSegmentStart && i + 2 === p.length) {
        re += ".*";
        i += 1;
      } else {
        re += "[^/]*";
        i += 1;
      }
    } else if (ch === "*") re += "[^/]*";
    else if (ch === "?") re += "[^/]";
    else if (ch === "[") {
      const end = p.indexOf("]", i + 2);
      if (end < 0) re += "\\[";
      else {
        const body = p.slice(i + 1, end).replace(/^!/, "^").replace(/\\/g, "\\\\");
        re += `[${body}]`;
        i = end;
      }
    } else if (ch === "\\" && i + 1 < p.length) re += `\\${p[++i]}`;
    else re += /[.+^${}()|\]\\]/.test(ch) ? `\\${ch}` : ch;
  }
  return { re: new RegExp(`^${anchored ? "" : "(?:.*/)?"}${re}$`, "u"), dirOnly };
}

function hasCacheTag(dir: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(join(dir, "CACHEDIR.TAG"), "r");
    const buf = Buffer.alloc(CACHEDIR_SIGNATURE.length);
    return readSync(fd, buf, 0, buf.length, 0) === buf.length && buf.toString("latin1") === CACHEDIR_SIGNATURE;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

async function gitOutput(git: string, args: string[], ceiling?: string): Promise<string | null> {
  // The ceiling keeps git from finding a repository above the sandbox's root (a host agent's sandboxes live in
  // the host's directories, maybe inside a repository of the host's).
  const env = ceiling ? ["env", `GIT_CEILING_DIRECTORIES=${ceiling}`] : [];
  const tool = startTool([...env, git, "-c", "safe.directory=*", "-c", "core.quotePath=false", ...args], { stdout: "pipe" });
  const chunks: Buffer[] = [];
  tool.child.stdout!.on("data", (c: Buffer) => chunks.push(c));
  try {
    await tool.done;
  } catch {
    return null;
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * The paths (relative to root; directories without their trailing '/') git ignores below `root`. `ceiling`: the
 * directory standing for the sandbox's "/" when it is not the host's.
 */
export async function gitIgnored(git: string, root: string, ceiling?: string): Promise<Set<string>> {
  const list = ["ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"];
  const inside = (await gitOutput(git, ["-C", root, "rev-parse", "--is-inside-work-tree"], ceiling))?.trim() === "true";
  let out = inside ? await gitOutput(git, ["-C", root, ...list], ceiling) : null;
  // Outside a work tree (or inside one git cannot list from here, such as an ignored directory of it):
  if (out === null) {
    // Not a work tree: a scratch repository over it, so git's rules (its .gitignore files) still apply.
    const scratch = await mkdtemp(join(tmpdir(), "snapflow-git-"));
    try {
      if ((await gitOutput(git, ["init", "-q", scratch])) === null) throw new AgentError("tool_failed", "gitignore: git init of a scratch repository failed");
      out = await gitOutput(git, ["--git-dir", join(scratch, ".git"), "--work-tree", root, "-C", root, ...list], ceiling);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }
  if (out === null) throw new AgentError("tool_failed", `gitignore: git ls-files failed in ${root}`);
  return new Set(out.split("\0").filter(Boolean).map((p) => p.replace(/\/$/, "")));
}

/**
 * Compiles a selection for the tree at `root`; undefined when it selects everything. `git` is where git is
 * (default: looked up on PATH; null: as if it were not installed).
 */
export async function compileSelection(root: string, spec: SelectionSpec | undefined, options: { git?: string | null; ceiling?: string } = {}): Promise<CompiledSelection | undefined> {
  if (!spec || (!spec.excludes.length && !spec.gitignore && !spec.excludeCaches)) return undefined;
  const patterns = spec.excludes.map((pattern) => ({ pattern, ...globToRegExp(pattern) }));
  const warnings: string[] = [];
  let ignored = new Set<string>();
  if (spec.gitignore) {
    const git = options.git === undefined ? await findOnPath("git") : options.git;
    if (git) ignored = await gitIgnored(git, root, options.ceiling);
    else warnings.push("gitignore: git is not installed in this sandbox, so .gitignore rules were not applied (nothing was excluded by them)");
  }
  const excluded = new Map<string, string>();
  const exclude: Exclude = (rel, isDir, hostPath) => {
    let rule: string | undefined;
    const hit = patterns.find((p) => (!p.dirOnly || isDir) && p.re.test(rel));
    if (hit) rule = `exclude ${hit.pattern}`;
    else if (ignored.has(rel)) rule = "gitignore";
    else if (spec.excludeCaches && isDir && hasCacheTag(hostPath)) rule = "CACHEDIR.TAG";
    if (rule) excluded.set(rel, rule);
    return rule !== undefined;
  };
  return {
    exclude,
    engineRules() {
      if (!patterns.every((p) => readsAlikeInRE2(p.re.source))) return undefined;
      return { patterns: patterns.map((p) => ({ pattern: p.pattern, re: p.re.source, dirOnly: p.dirOnly })), ignored: [...ignored], excludeCaches: spec.excludeCaches, record: { ...spec, warnings } };
    },
    record() {
      const counts: Record<string, number> = {};
      for (const rule of excluded.values()) counts[rule] = (counts[rule] ?? 0) + 1;
      return { ...spec, excluded: counts, warnings };
    },
  };
}

/** The selection a request carries in its SELECTION_HEADER (URI-encoded JSON), validated; undefined when none. */
export function requestedSelectionSpec(header: string | string[] | undefined): SelectionSpec | undefined {
  if (typeof header !== "string" || !header) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(decodeURIComponent(header));
  } catch {
    throw new AgentError("bad_request", `${SELECTION_HEADER}: not URI-encoded JSON`, "selection");
  }
  const r = SelectionSpec.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new AgentError("bad_request", `${["selection", ...issue.path].join(".")}: ${issue.message}`, ["selection", ...issue.path].join("."));
  }
  return r.data;
}

/**
 * The selected entries of `dir` as a tar list (`./name\0`, with --no-recursion --null -T), for the archivers that
 * take a list instead of the single pass's walk.
 */
export async function writeSelectedList(dir: string, selection: CompiledSelection, listFile: string): Promise<void> {
  const names = (await walkAll(dir, { exclude: selection.exclude })).filter((e) => !e.socket).map((e) => `./${e.path}\0`);
  await mkdir(dirname(listFile), { recursive: true });
  await writeFile(listFile, names.join(""));
}

/** The excluded entries of `dir` that are not below another excluded one: what an image builder is told to skip. */
export async function excludedTopLevel(dir: string, selection: CompiledSelection): Promise<string[]> {
  const out: string[] = [];
  await walkAll(dir, { exclude: (rel, isDir, host) => selection.exclude(rel, isDir, host) && (out.push(rel), true) });
  return out;
}

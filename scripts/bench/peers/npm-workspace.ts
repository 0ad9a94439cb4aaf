// Dataset (a) of the peers race: a real npm workspace, installed from the registry once into
// .snapflow/peers/npm-workspace from the package.json and lockfile committed in bench/npm-workspace, plus a small
// git repository (seeded sources, two commits with fixed dates) so that .git objects are part of the tree.
// A marker beside the cache records the lockfile's hash: a changed lockfile means a fresh install.
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PROJECT, STATE } from "../../stack/stack.ts";
import { q, sh } from "./shell.ts";

const SOURCE = join(PROJECT, "bench", "npm-workspace");
export const NPM_WORKSPACE_CACHE = join(STATE, "peers", "npm-workspace");
const MARKER = `${NPM_WORKSPACE_CACHE}.installed`;
// Bump when the git repository's recipe changes, so that caches are rebuilt.
const RECIPE = "git-repo-v1";

/** The installed workspace's directory, installing it first when the cache is missing or stale. */
export async function ensureNpmWorkspace(log: (line: string) => void): Promise<string> {
  const lock = readFileSync(join(SOURCE, "package-lock.json"));
  const want = `${createHash("sha256").update(lock).update(readFileSync(join(SOURCE, "package.json"))).digest("hex")} ${RECIPE}\n`;
  if (existsSync(MARKER) && readFileSync(MARKER, "utf8") === want) return NPM_WORKSPACE_CACHE;

  rmSync(MARKER, { force: true });
  rmSync(NPM_WORKSPACE_CACHE, { recursive: true, force: true });
  mkdirSync(NPM_WORKSPACE_CACHE, { recursive: true });
  for (const f of ["package.json", "package-lock.json"]) copyFileSync(join(SOURCE, f), join(NPM_WORKSPACE_CACHE, f));
  log(`peers: installing the npm workspace (bench/npm-workspace) into ${NPM_WORKSPACE_CACHE} — once, about a minute`);
  const npm = "npm --no-audit --no-fund --loglevel=error";
  try {
    await sh(`${npm} ci --ignore-scripts`, { cwd: NPM_WORKSPACE_CACHE });
  } catch {
    // npm ci refuses a lockfile that lacks other platforms' optional packages (next's swc, rollup, esbuild),
    // which a registry mirror without them produces (see shared/LOCAL-STACK.md). `npm install` with the same
    // lockfile installs the same versions; we check below that it left the lockfile as committed.
    log("peers: npm ci refused the lockfile (optional platform packages missing from the registry); npm install with the committed lockfile instead");
    await sh(`${npm} install --ignore-scripts`, { cwd: NPM_WORKSPACE_CACHE });
    const changed = lockDrift(lock, readFileSync(join(NPM_WORKSPACE_CACHE, "package-lock.json")));
    if (changed.length) {
      throw new Error(`npm install changed bench/npm-workspace/package-lock.json in ${NPM_WORKSPACE_CACHE} (${changed.slice(0, 5).join("; ")}): the lockfile no longer matches package.json; regenerate it (npm install --package-lock-only --ignore-scripts) and commit it`);
    }
  }
  await makeGitRepo(NPM_WORKSPACE_CACHE);
  writeFileSync(MARKER, want);
  const { stdout } = await sh(`du -sm . | cut -f1; find . | wc -l`, { cwd: NPM_WORKSPACE_CACHE });
  const [mb, entries] = stdout.trim().split("\n");
  log(`peers: npm workspace ready: ${mb} MB, ${entries} entries`);
  return NPM_WORKSPACE_CACHE;
}

type LockPackages = Record<string, { version?: string; integrity?: string; optional?: boolean }>;

/**
 * What `npm install` changed in the committed lockfile that matters: a package whose version or integrity differs,
 * one that went missing, or one added that is not optional. npm adds entries for other platforms' optional
 * packages (rollup's, esbuild's, swc's builds) when the registry has them: the same install, not drift.
 */
export function lockDrift(committed: Buffer, installed: Buffer): string[] {
  const was = (JSON.parse(committed.toString()) as { packages: LockPackages }).packages;
  const now = (JSON.parse(installed.toString()) as { packages: LockPackages }).packages;
  const out: string[] = [];
  for (const [name, p] of Object.entries(was)) {
    const q = now[name];
    if (!q) out.push(`${name || "(root)"} missing`);
    else if (q.version !== p.version || q.integrity !== p.integrity) out.push(`${name || "(root)"} ${p.version} → ${q.version}`);
  }
  for (const [name, q] of Object.entries(now)) if (!(name in was) && !q.optional) out.push(`${name} added`);
  return out;
}

/** ~200 seeded source files in src/, committed twice with fixed identities and dates. */
async function makeGitRepo(dir: string): Promise<void> {
  const src = join(dir, "src");
  const write = (round: number) => {
    for (let i = 0; i < 200; i++) {
      const h = createHash("sha256").update(`src:${round}:${i}`).digest("hex");
      const lines = Array.from({ length: 20 + (parseInt(h.slice(0, 2), 16) % 80) }, (_, j) => `export const v${j}_${h.slice(j % 56, (j % 56) + 8)} = ${j} * ${parseInt(h.slice(8, 12), 16)};`);
      if (round === 0 || i % 5 === 0) writeFileSync(join(src, `module-${String(i).padStart(3, "0")}.ts`), `// generated module ${i}\n${lines.join("\n")}\n`);
    }
  };
  mkdirSync(src, { recursive: true });
  writeFileSync(join(dir, ".gitignore"), "node_modules/\n");
  const git = "git -c user.name=bench -c user.email=bench@snapflow.invalid -c init.defaultBranch=main -c commit.gpgsign=false";
  // GIT_DIR pins every command to this repository: never the project's own, which encloses .snapflow/.
  const env = { ...process.env, GIT_DIR: join(dir, ".git"), GIT_WORK_TREE: dir, GIT_AUTHOR_DATE: "2026-01-01T00:00:00Z", GIT_COMMITTER_DATE: "2026-01-01T00:00:00Z" };
  write(0);
  await sh(`${git} init -q && ${git} add . && ${git} commit -q -m first`, { cwd: dir, env });
  write(1);
  await sh(`${git} add . && ${git} commit -q -m ${q("second")}`, { cwd: dir, env });
}

// Deterministic datasets, generated inside the sandbox so that the same tree exists locally and in production.
//
// - "node-modules": a JS workspace: src/, package manifests, node_modules/ with scoped and nested packages,
//   mostly small text files (JS, .d.ts, JSON, Markdown, source maps) with some binaries (.node, .wasm, .png)
//   and a .git directory whose pack files are incompressible. Sizes are log-normal, scaled to the requested
//   total. The same (seed, files, bytes) gives the same bytes, names, modes and mtimes.
// - "added-data": snapshot-create-restore-benchmark.md's shapes: a node-modules base plus N bytes of added data
//   under added/. That seed's archives grew by about the added size at every compressor (10 MB → 5 GB), so the
//   added data is incompressible: AES-CTR bytes in files of at most 256 MiB.
// - "tricky": a small tree of the cases restores get wrong: symlinks (relative, absolute, dangling, to a dir),
//   hard links, empty dirs and files, a sparse file, unusual modes, unicode, spaces and long names.
//
// Randomness: a seeded PRNG (sfc32) for choices, AES-128-CTR keyed by the seed for bulk incompressible bytes.
import { createCipheriv, createHash } from "node:crypto";
import { chmod, link, mkdir, open, symlink, utimes, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

export type DatasetKind = "node-modules" | "tricky" | "added-data";

export interface DatasetSpec {
  kind: DatasetKind;
  seed: number;
  /** node-modules only: number of files and total bytes to aim for */
  files?: number;
  bytes?: number;
  /** added-data only: incompressible bytes added under added/ on top of a node-modules base */
  addedBytes?: number;
}

export interface DatasetResult {
  files: number;
  bytes: number;
  ms: number;
}

/** sfc32: small, fast, good enough for choosing names and sizes. */
export function prng(seed: number): () => number {
  let a = 0x9e3779b9, b = 0x243f6a88, c = 0xb7e15162, d = seed >>> 0;
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    const t = (a + b + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t / 4294967296;
  };
  for (let i = 0; i < 16; i++) next();
  return next;
}

function randomBytes(seed: number, label: string, size: number): Buffer {
  const key = createHash("sha256").update(`${seed}:${label}`).digest();
  const cipher = createCipheriv("aes-128-ctr", key.subarray(0, 16), key.subarray(16, 32));
  return cipher.update(Buffer.alloc(size));
}

const WORDS = (
  "const let var function return if else for while import export default from require module exports async await " +
  "new this class extends super static get set typeof instanceof undefined null true false Object Array String Number " +
  "Promise resolve reject then catch finally value key options config props state error result data buffer stream " +
  "length push map filter reduce forEach keys entries assign create defineProperty prototype call apply bind"
).split(" ");
const PUNCT = ["(", ")", "{", "}", ";", ",", ".", " = ", " === ", " => ", "[", "]", ": ", " && ", " || ", "\n", "\n  ", "\n    "];

/** JS-like text: a token stream with identifiers and numbers mixed in, about 4:1 under zstd like real code. */
function codeText(rand: () => number, size: number): string {
  const parts: string[] = [];
  let n = 0;
  while (n < size) {
    const r = rand();
    const token =
      r < 0.55 ? WORDS[(rand() * WORDS.length) | 0]! :
      r < 0.89 ? PUNCT[(rand() * PUNCT.length) | 0]! :
      r < 0.96 ? `_${((rand() * 0xfff) | 0).toString(36)}` :
      String((rand() * 100000) | 0);
    const sep = r < 0.55 ? " " : "";
    parts.push(token, sep);
    n += token.length + sep.length;
  }
  return parts.join("").slice(0, size);
}

interface Planned {
  path: string;
  size: number;
  binary: boolean;
  mode: number;
}

const TEXT_EXT = [".js", ".js", ".js", ".js", ".cjs", ".mjs", ".d.ts", ".d.ts", ".json", ".md", ".js.map", ".ts"];
const BINARY_EXT = [".node", ".wasm", ".png", ".woff2"];
const FILE_STEMS = ["index", "utils", "helpers", "core", "parser", "types", "runtime", "compat", "stream", "errors", "constants", "main"];
const SUBDIRS = ["", "lib", "dist", "src", "dist/esm", "dist/cjs", "lib/internal", "types"];

function planNodeModules(seed: number, files: number, bytes: number): Planned[] {
  const rand = prng(seed);
  const planned: Planned[] = [];
  // Git packs: ~8% of the bytes in 3 incompressible files, as a cloned repository has.
  const packBytes = Math.floor(bytes * 0.08);
  for (let i = 0; i < 3; i++) {
    planned.push({ path: `.git/objects/pack/pack-${i}${randomBytes(seed, `pack${i}`, 20).toString("hex")}.pack`, size: Math.floor(packBytes / 3), binary: true, mode: 0o444 });
  }
  planned.push({ path: ".git/HEAD", size: 23, binary: false, mode: 0o644 });
  planned.push({ path: "package.json", size: 900, binary: false, mode: 0o644 });
  for (let i = 0; i < 20 && planned.length < files; i++) planned.push({ path: `src/module-${i}.ts`, size: 4000, binary: false, mode: 0o644 });

  // Packages of 5–40 files each; some scoped, some nested one level.
  let pkg = 0;
  while (planned.length < files) {
    const scoped = rand() < 0.2;
    const name = scoped ? `@scope-${pkg % 37}/pkg-${pkg}` : `pkg-${pkg}`;
    const nested = rand() < 0.15 && pkg > 10 ? `node_modules/pkg-${(rand() * pkg) | 0}/` : "";
    const base = `node_modules/${nested}${name}`;
    planned.push({ path: `${base}/package.json`, size: 600 + ((rand() * 1400) | 0), binary: false, mode: 0o644 });
    const count = 5 + ((rand() * 35) | 0);
    for (let f = 0; f < count && planned.length < files; f++) {
      const binary = rand() < 0.04;
      const ext = binary ? BINARY_EXT[(rand() * BINARY_EXT.length) | 0]! : TEXT_EXT[(rand() * TEXT_EXT.length) | 0]!;
      const dir = SUBDIRS[(rand() * SUBDIRS.length) | 0]!;
      const stem = `${FILE_STEMS[(rand() * FILE_STEMS.length) | 0]}${f}`;
      // log-normal: most files a few KB, a long tail of large bundles
      const size = Math.exp(7.6 + 1.5 * Math.sqrt(-2 * Math.log(rand() || 1e-9)) * Math.cos(2 * Math.PI * rand()));
      const isBin = dir === "" && rand() < 0.05;
      planned.push({ path: `${base}/${isBin ? "bin/cli" + f : (dir ? dir + "/" : "") + stem + ext}`, size, binary, mode: isBin ? 0o755 : 0o644 });
    }
    pkg++;
  }
  planned.length = Math.min(planned.length, files);

  // Scale the package files so that the whole tree meets the byte target.
  const fixed = planned.slice(0, 3).reduce((s, p) => s + p.size, 0);
  const variable = planned.slice(3).reduce((s, p) => s + p.size, 0);
  const scale = Math.max(0, bytes - fixed) / (variable || 1);
  for (const p of planned.slice(3)) p.size = Math.max(0, Math.round(p.size * scale));
  return planned;
}

async function inBatches<T>(items: T[], size: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(work));
}

const MTIME_BASE = 1_700_000_000;

async function generateNodeModules(root: string, spec: DatasetSpec): Promise<{ files: number; bytes: number }> {
  const files = spec.files ?? 30_000;
  const bytes = spec.bytes ?? 600 * 1024 * 1024;
  const planned = planNodeModules(spec.seed, files, bytes);
  const dirs = new Set<string>();
  // Every directory below root, not only files' parents: one holding only directories (node_modules/, a scope)
  // would otherwise keep the wall-clock mtime of its creation, and two generations would differ.
  for (const p of planned) {
    const segments = p.path.split("/").slice(0, -1);
    for (let i = 1; i <= segments.length; i++) dirs.add(join(root, ...segments.slice(0, i)));
  }
  for (const d of [...dirs].sort()) await mkdir(d, { recursive: true });
  let total = 0;
  await inBatches(planned, 64, async (p) => {
    const host = join(root, p.path);
    const rand = prng(spec.seed ^ hashString(p.path));
    const body = p.binary ? randomBytes(spec.seed, p.path, p.size) : Buffer.from(codeText(rand, p.size));
    await writeFile(host, body, { mode: p.mode });
    await chmod(host, p.mode);
    const t = MTIME_BASE + ((rand() * 3e7) | 0);
    await utimes(host, t, t);
    total += body.length;
  });
  // node_modules/.bin: a relative symlink per executable, as npm makes them.
  const bins = planned.filter((p) => p.mode === 0o755 && p.path.startsWith("node_modules/"));
  if (bins.length) {
    await mkdir(join(root, "node_modules/.bin"), { recursive: true });
    dirs.add(join(root, "node_modules/.bin"));
    for (const b of bins) {
      const name = b.path.slice("node_modules/".length).replaceAll("/", "-");
      await symlink(`../${b.path.slice("node_modules/".length)}`, join(root, "node_modules/.bin", name));
    }
  }
  // Directory mtimes last: writing files into a directory changes its mtime.
  for (const d of [...dirs].sort().reverse()) await utimes(d, MTIME_BASE, MTIME_BASE);
  return { files: planned.length, bytes: total };
}

function hashString(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

async function generateTricky(root: string, seed: number): Promise<{ files: number; bytes: number }> {
  const rand = prng(seed);
  const w = async (rel: string, body: string | Buffer, mode = 0o644) => {
    await mkdir(dirname(join(root, rel)), { recursive: true });
    await writeFile(join(root, rel), body);
    await chmod(join(root, rel), mode);
  };
  await w("plain.txt", codeText(rand, 5000));
  await w("empty-file", "");
  await w("bin/run.sh", "#!/bin/sh\necho hi\n", 0o755);
  await w("secret/only-me", "x", 0o600);
  await w("read-only.txt", "ro", 0o444);
  await w("unicode/café-naïve-日本語-😀.txt", "unicode");
  await w("names/with space and -dash", "space");
  await w(`names/${"long-name-".repeat(24)}end`, "long");
  await w(`deep/${"d/".repeat(40)}leaf.txt`, "deep");
  await w("binary.bin", randomBytes(seed, "binary", 70_000));
  await mkdir(join(root, "empty-dir/nested-empty"), { recursive: true });
  await mkdir(join(root, "private-dir"), { recursive: true });
  await chmod(join(root, "private-dir"), 0o700);
  await symlink("plain.txt", join(root, "link-to-file"));
  await symlink("unicode", join(root, "link-to-dir"));
  await symlink("does/not/exist", join(root, "dangling-link"));
  await symlink("/snapflow/elsewhere", join(root, "absolute-link"));
  await link(join(root, "plain.txt"), join(root, "hard-link-to-plain"));
  // Sparse: 8 MiB apparent size with one written block in the middle.
  const sparse = await open(join(root, "sparse.img"), "w");
  await sparse.write(Buffer.from("middle"), 0, 6, 4 * 1024 * 1024);
  await sparse.truncate(8 * 1024 * 1024);
  await sparse.close();
  return { files: 12, bytes: 5000 + 19 + 1 + 2 + 7 + 5 + 4 + 4 + 70_000 + 8 * 1024 * 1024 };
}

const ADDED_FILE_BYTES = 256 * 2 ** 20;

async function generateAddedData(root: string, spec: DatasetSpec): Promise<{ files: number; bytes: number }> {
  const base = await generateNodeModules(root, { ...spec, files: spec.files ?? 10_000, bytes: spec.bytes ?? 190e6 });
  const dir = join(root, "added");
  await mkdir(dir, { recursive: true });
  let left = spec.addedBytes ?? 0;
  let files = 0;
  while (left > 0) {
    const size = Math.min(left, ADDED_FILE_BYTES);
    const file = join(dir, `blob-${String(files).padStart(4, "0")}.bin`);
    // Written in 8 MiB slices so that memory stays flat whatever the size.
    const out = await open(file, "w");
    for (let offset = 0; offset < size; offset += 8 * 2 ** 20) {
      await out.write(randomBytes(spec.seed, `added-${files}-${offset}`, Math.min(8 * 2 ** 20, size - offset)));
    }
    await out.close();
    await utimes(file, MTIME_BASE, MTIME_BASE);
    left -= size;
    files++;
  }
  await utimes(dir, MTIME_BASE, MTIME_BASE);
  await utimes(root, MTIME_BASE, MTIME_BASE);
  return { files: base.files + files, bytes: base.bytes + (spec.addedBytes ?? 0) };
}

export async function generateDataset(root: string, spec: DatasetSpec): Promise<DatasetResult> {
  const started = performance.now();
  await mkdir(root, { recursive: true });
  const made = spec.kind === "tricky" ? await generateTricky(root, spec.seed) : spec.kind === "added-data" ? await generateAddedData(root, spec) : await generateNodeModules(root, spec);
  return { ...made, ms: Math.round(performance.now() - started) };
}

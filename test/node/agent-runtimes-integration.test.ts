// The agent bundled and run by Bun, as production runs it (Dockerfile), answers as the agent the other tests run
// (the source under Node 22): both serve one sandboxes directory, and each answer is compared.
//
// Where the two runtimes differ the agent must use what both do. Found so far:
// - readdir order: Node's fs.readdir sorts names (libuv's scandir), Bun's returns the directory's own order (ext4:
//   hash order; tmpfs: newest first). Every walk whose order reaches an answer sorts (tree-walk.ts, manifest.ts);
//   the directory below is created in an order that is neither sorted nor reversed, so an unsorted walk under Bun
//   gives a different manifest, and a different hard-link leader, from Node's.
// The Worker-side suites run against the Bun-built agent too: npm run test:bun.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { agentCommand, findBun } from "../../scripts/stack/agent-runtime.ts";
import { PROJECT, startAgent } from "../../scripts/stack/stack.ts";

const SECRET = randomBytes(32).toString("hex");
const STORE_ORIGIN = "http://store.invalid:9000";
const bun = (() => {
  try {
    return findBun(PROJECT);
  } catch {
    return null;
  }
})();
const runtimes = ["node", "bun"] as const;
type Agent = Awaited<ReturnType<typeof startAgent>>;
const agents = {} as Record<(typeof runtimes)[number], Agent>;
let dir: string;
let sandboxesDir: string;

beforeAll(async () => {
  if (!bun) return;
  dir = mkdtempSync(join(tmpdir(), "snapflow-runtimes-"));
  sandboxesDir = join(dir, "sandboxes");
  for (const runtime of runtimes) {
    const { argv } = agentCommand(runtime, PROJECT, join(dir, runtime));
    agents[runtime] = await startAgent({ secret: SECRET, storeEndpoint: STORE_ORIGIN, sandboxesDir, logFile: join(dir, `${runtime}.log`), argv });
  }
}, 60_000);
afterAll(async () => {
  for (const a of Object.values(agents)) await a.process.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function call(runtime: (typeof runtimes)[number], sandbox: string, method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${await agentTokenFor(SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox };
  if (body !== undefined) headers["content-type"] = "application/json";
  return fetch(`${agents[runtime].url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function both(sandbox: string, method: string, path: string, body?: unknown): Promise<{ node: any; bun: any }> {
  const [node, bun] = await Promise.all(runtimes.map(async (r) => {
    const res = await call(r, sandbox, method, path, body);
    expect(res.status, `${r}: ${method} ${path}`).toBe(200);
    return res.json();
  }));
  return { node, bun };
}

describe.skipIf(!bun)(`the agent under Bun and under Node${bun ? "" : " — SKIPPED: no bun in node_modules/.bin or on PATH (npm install brings it)"}`, () => {
  it("each runs the runtime it was started with", async () => {
    const { node, bun } = await both("runtimes-probe", "GET", "/v1/probe");
    expect(node.runtime).toMatch(/^node v22\./);
    expect(bun.runtime).toMatch(/^bun \d+\.\d+\.\d+$/);
  });

  it("probe the same machine: tools (paths and versions), filesystems, FUSE, capabilities", async () => {
    const { node, bun } = await both("runtimes-probe", "GET", "/v1/probe");
    const machine = (p: any) => ({ kernel: p.kernel, filesystems: p.filesystems, fuse: p.fuse, capSysAdmin: p.capSysAdmin, root: p.root, tools: p.tools, cpus: p.cpus });
    expect(machine(bun)).toEqual(machine(node));
  });

  it("walk a directory in its sorted order, whatever order readdir gives: the same manifest, the same hard-link leaders", async () => {
    const sandbox = "runtimes-order";
    const app = join(sandboxesDir, sandbox, "workspace/app");
    mkdirSync(app, { recursive: true });
    // Created neither sorted nor reversed; hard links whose leader (the first name in walk order) is "a-first".
    for (const name of ["m", "z-last", "B", "a-first", "k", "A", "q"]) writeFileSync(join(app, name), `${name}\n`);
    for (const name of ["zz-link", "b-link"]) linkSync(join(app, "a-first"), join(app, name));
    const { node, bun } = await both(sandbox, "POST", "/v1/manifest", { path: "/workspace/app" });
    expect(bun.entries).toEqual(node.entries);
    const paths = node.entries.map((e: any) => e.path);
    expect(paths).toEqual([...paths].sort());
    expect(node.entries.find((e: any) => e.path === "b-link")).toMatchObject({ link: "a-first" });
  });

  it("the tricky dataset: one agent makes it, both describe it identically and stream the same archive", async () => {
    const sandbox = "runtimes-tricky";
    expect((await call("node", sandbox, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 5 })).status).toBe(200);
    const { node, bun } = await both(sandbox, "POST", "/v1/manifest", { path: "/workspace/app" });
    expect(bun).toEqual(node);
    // The same tar on the same tree, through each runtime's child process pipes and HTTP response streaming. Not
    // byte for byte: GNU tar names a sparse file's pax header after its own pid (GNUSparseFile.<pid>), so two runs
    // differ there; every entry tar lists (names, types, modes, owners, sizes, ns times, link targets) and every
    // file's bytes must agree.
    const described = await Promise.all(runtimes.map(async (r) => {
      const res = await call(r, sandbox, "GET", "/v1/archive?path=/workspace/app&kind=tar&compression=zstd");
      expect(res.status, r).toBe(200);
      const tar = execFileSync("zstd", ["-dc"], { input: Buffer.from(await res.arrayBuffer()), maxBuffer: 1 << 30 });
      const listing = execFileSync("tar", ["-tv", "--numeric-owner", "--full-time", "-f", "-"], { input: tar, maxBuffer: 1 << 30 }).toString();
      const dir = mkdtempSync(join(tmpdir(), `runtimes-${r}-`));
      try {
        execFileSync("tar", ["-x", "-C", dir, "-f", "-"], { input: tar });
        const files = execFileSync("sh", ["-c", "find . -type f -print0 | sort -z | xargs -0 sha256sum"], { cwd: dir }).toString();
        return { listing, files };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }));
    expect(described[1]!.listing).toBe(described[0]!.listing);
    expect(described[1]!.files).toBe(described[0]!.files);
    expect(described[0]!.files.split("\n").length).toBeGreaterThan(5);
  });
});

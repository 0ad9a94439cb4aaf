// The default restore's bytes, the agent's own path (Node fetches, hashes and parses the tar stream beside zstd -d and
// GNU tar -x, then sanitize, merge and a Node walk) against the native engine (`snapflow-lazy unpack`: one process),
// against the floor `curl | zstd -d | tar -x`, all three reading the same tar.zst over HTTP from one file server.
// Each run of a path is a fresh Node process holding the real agent (createAgentServer, as the host agent runs) that
// answers one POST /v1/download {url, extract: {expected: manifest URL + SHA-256}}: wall time of that request, and
// CPU-seconds (utime + stime from /proc) of the agent's own process and of what it reaped (the engine, or tar, zstd,
// sanitize and merge), and of the file server ("store"). The three alternate run by run (A B C, then C B A, …); the
// tree of the previous run is removed and `sync` run before each, so no run pays another's writeback. Medians printed
// as JSON; every restored tree is compared with the floor's (diff -r) once.
// Usage: node scripts/experiments/unpack-engine.ts DIR [RUNS]      (native/lazy/bin/snapflow-lazy built first)
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { procTimes } from "../stack/cpu-seconds.ts";

const HERE = new URL(".", import.meta.url).pathname;
const BIN = join(HERE, "../../native/lazy/bin");
type Path = "node" | "native" | "floor";

/** A file server with Range support: the store's stand-in (its CPU is the "store" column). */
function serve(dir: string): void {
  const server: Server = createServer((req, res) => {
    const file = join(dir, new URL(req.url ?? "/", "http://x").pathname);
    const size = statSync(file).size;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    const start = range ? Number(range[1]) : 0;
    res.writeHead(range ? 206 : 200, { "content-length": size - start, ...(range ? { "content-range": `bytes ${start}-${size - 1}/${size}` } : {}) });
    createReadStream(file, { start, highWaterMark: 1 << 20 }).pipe(res);
  });
  server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
}

/** One restore through a fresh agent in this process: prints wall and CPU-seconds (own, reaped). */
async function one(path: "node" | "native", base: string, origin: string, manifestSha: string): Promise<void> {
  process.env.SNAPFLOW_UNPACK_ENGINE = path;
  process.env.PATH = `${BIN}:${process.env.PATH ?? ""}`;
  const { createAgentServer } = await import("../../container/http/server.ts");
  const { agentTokenFor } = await import("../../container/contract/agent-token.ts");
  const secret = randomBytes(32).toString("hex");
  const server = createAgentServer({ auth: { secret }, sandboxesDir: join(base, "sandboxes"), storeOrigins: [origin] });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const headers = { authorization: `Bearer ${await agentTokenFor(secret, "sb")}`, "x-snapflow-sandbox": "sb", "content-type": "application/json" };
  const body = JSON.stringify({ url: `${origin}/a.tar.zst`, extract: { path: "/workspace/restored", format: { kind: "tar", compression: "zstd" }, expected: { url: `${origin}/m.json`, sha256: manifestSha } } });
  const before = procTimes(process.pid)!;
  const t = performance.now();
  const r = await fetch(`${url}/v1/download`, { method: "POST", headers, body });
  const answer = await r.json();
  const wall = (performance.now() - t) / 1000;
  const after = procTimes(process.pid)!;
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(answer)}`);
  console.log(JSON.stringify({ wall, agent: after.own - before.own, engine: after.reaped - before.reaped, verified: answer.verified }));
  server.close();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

if (process.argv[2] === "--serve") serve(process.argv[3]!);
else if (process.argv[2] === "--one") await one(process.argv[3] as "node" | "native", process.argv[4]!, process.argv[5]!, process.argv[6]!);
else {
  const [, , dir, runsArg = "3"] = process.argv;
  if (!dir) throw new Error("usage: unpack-engine.ts DIR [RUNS]");
  const work = mkdtempSync(join(tmpdir(), "unpack-engine-"));
  execFileSync(join(BIN, "snapflow-lazy"), ["pack", "--root", dir, "--manifest", join(work, "m.json"), "--out", join(work, "a.tar.zst"), "--result-fd", "2"], { input: "{}", stdio: ["pipe", "ignore", "ignore"] });
  const manifestSha = createHash("sha256").update(readFileSync(join(work, "m.json"))).digest("hex");
  const store = spawn(process.execPath, [join(HERE, "unpack-engine.ts"), "--serve", work], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => store.stdout!.once("data", (d: Buffer) => resolve(JSON.parse(d.toString()).port)));
  const origin = `http://127.0.0.1:${port}`;
  const base = join(work, "agent");
  const restored = (p: Path) => (p === "floor" ? join(work, "floor") : join(base, "sandboxes/sb/workspace/restored"));
  const runs: Record<Path, { wall: number; agent: number; engine: number; store: number }[]> = { node: [], native: [], floor: [] };
  const paths: Path[] = ["node", "native", "floor"];
  for (let i = 0; i < Number(runsArg); i++) {
    for (const p of i % 2 === 0 ? paths : [...paths].reverse()) {
      for (const q of paths) rmSync(restored(q), { recursive: true, force: true });
      mkdirSync(join(base, "sandboxes/sb/workspace"), { recursive: true });
      execFileSync("sync");
      const s0 = procTimes(store.pid!)!;
      let r: { wall: number; agent: number; engine: number };
      if (p === "floor") {
        mkdirSync(restored("floor"));
        const t = performance.now();
        const f = spawnSync("/usr/bin/time", ["-f", "TIME %U %S", "sh", "-c", `curl -sf ${origin}/a.tar.zst | zstd -d -q | tar -C ${restored("floor")} -xf -`], { encoding: "utf8" });
        if (f.status !== 0) throw new Error(`floor: ${f.stderr}`);
        const [u, s] = /TIME ([\d.]+) ([\d.]+)/.exec(f.stderr)!.slice(1).map(Number) as [number, number];
        r = { wall: (performance.now() - t) / 1000, agent: 0, engine: u + s };
      } else {
        const o = spawnSync(process.execPath, [join(HERE, "unpack-engine.ts"), "--one", p, base, origin, manifestSha], { encoding: "utf8" });
        if (o.status !== 0) throw new Error(`${p}: ${o.stderr}`);
        r = JSON.parse(o.stdout.trim().split("\n").at(-1)!);
        if (p === "native" && (r as { verified?: { engine?: string } }).verified?.engine !== "native") throw new Error("the native path did not run the engine (is native/lazy/bin/snapflow-lazy built?)");
      }
      const s1 = procTimes(store.pid!)!;
      runs[p].push({ wall: r.wall, agent: r.agent, engine: r.engine, store: s1.own - s0.own });
      console.error(`run ${i + 1} ${p}: wall ${r.wall.toFixed(2)} s, CPU agent ${r.agent.toFixed(2)} engine/children ${r.engine.toFixed(2)} store ${(s1.own - s0.own).toFixed(2)}`);
    }
    if (i === 0) {
      // Every path's tree equals the floor's: run each once more, back to back, and diff.
      for (const p of ["node", "native"] as const) {
        rmSync(restored(p), { recursive: true, force: true });
        mkdirSync(restored("floor"), { recursive: true });
        spawnSync("sh", ["-c", `curl -sf ${origin}/a.tar.zst | zstd -d -q | tar -C ${restored("floor")} -xf -`]);
        const o = spawnSync(process.execPath, [join(HERE, "unpack-engine.ts"), "--one", p, base, origin, manifestSha], { encoding: "utf8" });
        if (o.status !== 0) throw new Error(`${p}: ${o.stderr}`);
        const d = spawnSync("diff", ["-r", "--no-dereference", restored(p), restored("floor")], { encoding: "utf8" });
        console.error(`diff -r ${p} floor: ${d.status === 0 ? "identical" : d.stdout.slice(0, 300)}`);
        rmSync(restored("floor"), { recursive: true, force: true });
      }
    }
  }
  store.kill();
  const summary = Object.fromEntries(paths.map((p) => {
    const xs = runs[p];
    const total = xs.map((x) => x.agent + x.engine + x.store);
    return [p, { wallS: median(xs.map((x) => x.wall)), agent: median(xs.map((x) => x.agent)), engine: median(xs.map((x) => x.engine)), store: median(xs.map((x) => x.store)), total: median(total), walls: xs.map((x) => +x.wall.toFixed(2)), totals: total.map((x) => +x.toFixed(2)) }];
  }));
  console.log(JSON.stringify({ dir, runs: Number(runsArg), archiveBytes: statSync(join(work, "a.tar.zst")).size, ...summary }, null, 1));
  rmSync(work, { recursive: true, force: true });
}

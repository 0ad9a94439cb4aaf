// Where a lazy base's mount time goes: the kernel's squashfs mounted over snapflow-lazy's FUSE file right after the
// helper starts, with the cache empty (a fork restored into a fresh sandbox: the superblock's and the tables' chunks
// still in the store) and with every chunk already cached; and, for scale, mount(8) of the same image from a plain
// file and a bare spawn from the agent. A real agent (in this process), helper, SeaweedFS and kernel mounts; run as
// root with native/lazy/bin on PATH:
//   PATH=$PWD/native/lazy/bin:$PATH node scripts/experiments/lazy-mount-cold.ts [files] [runs]
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { runQuiet } from "../../container/images/images.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { AwsClient } from "aws4fetch";
import { readFileSync } from "node:fs";
import { startObjectStore } from "../stack/object-store-server.ts";

const [files = "20000", runs = "8"] = process.argv.slice(2);
const SECRET = randomBytes(32).toString("hex");
const SB = "exp";
const base = mkdtempSync(join(tmpdir(), "snapflow-exp-"));
const host = (p: string) => join(base, "sandboxes", SB, p);
const s3 = await startObjectStore({ dir: join(base, "s3"), bucket: "exp", log: () => {} });
const aws = new AwsClient({ accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, region: s3.region, service: "s3" });
const chunkUrl = (d: string) => `${s3.endpoint}/${s3.bucket}/chunks/${d}`;
const server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: [s3.endpoint] });
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function call(method: string, path: string, body?: unknown): Promise<any> {
  const r = await fetch(`${agentUrl}${path}`, { method, headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SB)}`, "x-snapflow-sandbox": SB, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const j = await r.json();
  if (!r.ok) throw new Error(`${path}: ${JSON.stringify(j)}`);
  return j;
}
const ms = async (f: () => Promise<unknown>) => {
  const s = performance.now();
  await f();
  return Math.round(performance.now() - s);
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const FORMAT = { kind: "squashfs", compression: "zstd", level: 3, chunks: { avg: 512 * 1024 } } as const;
try {
  await call("POST", "/v1/datasets", { path: "/workspace/src", kind: "node-modules", seed: 7, files: Number(files) });
  await call("POST", "/v1/image", { path: "/workspace/src", output: "/snapflow/staging/img.sqsh", format: FORMAT });
  const { index } = await call("POST", "/v1/chunks/index", { image: "/snapflow/staging/img.sqsh", output: "/snapflow/staging/img.index.json", avg: FORMAT.chunks.avg });
  const image = readFileSync(host("snapflow/staging/img.sqsh"));
  for (const c of index.chunks as { sha256: string; offset: number; size: number }[]) {
    const put = await aws.fetch(chunkUrl(c.sha256), { method: "PUT", body: image.subarray(c.offset, c.offset + c.size) });
    if (!put.ok) throw new Error(`PUT ${c.sha256}: ${put.status}`);
  }
  const distinct = [...new Set<string>(index.chunks.map((c: { sha256: string }) => c.sha256))];
  const urls: Record<string, string> = Object.fromEntries(await Promise.all(distinct.map(async (d) => [d, (await aws.sign(chunkUrl(d), { method: "GET", aws: { signQuery: true } })).url])));
  console.log(`${files} files: image ${(index.size / 1e6).toFixed(1)} MB, ${distinct.length} chunks`);

  // The URLs a restore starts with (src/chunks/mount-set.ts): the first HEAD chunks and the tables' (the rest come later).
  const head = Number(process.env.HEAD ?? 16);
  // As src/chunks/mount-set.ts splitForMount picks them (not imported: it brings the Worker's store types along).
  const tables = index.tables as { from: number; to: number };
  const first = [...new Set<string>((index.chunks as { sha256: string; offset: number; size: number }[]).filter((c, i) => i < head || (c.offset + c.size > tables.from && c.offset < tables.to)).map((c) => c.sha256))];
  const startUrls = Object.fromEntries(first.map((d) => [d, urls[d]!]));
  console.log(`the mount starts with ${first.length} URLs (${head} head chunks and the tables')`);
  const mountLower = async (work: string) => {
    const m = await call("POST", "/v1/lazy/mount", { index: "/snapflow/staging/img.index.json", urls: startUrls, moreUrls: true, work, cache: "/snapflow/chunks", path: "/workspace/lower", format: FORMAT, prefetch: 4 });
    await call("POST", "/v1/clear", { unmount: [`${work}/fuse`], remove: [work] });
    return m as { fuseMs: number; mountMs: number };
  };
  const cold: { fuseMs: number; mountMs: number }[] = [];
  for (let i = 0; i < Number(runs); i++) {
    rmSync(host("snapflow/chunks"), { recursive: true, force: true });
    cold.push(await mountLower("/snapflow/lazy/cold"));
  }
  // Every chunk cached: one mount left to complete first.
  await call("POST", "/v1/lazy/mount", { index: "/snapflow/staging/img.index.json", urls, work: "/snapflow/lazy/fill", cache: "/snapflow/chunks", format: FORMAT, prefetch: 4 });
  await call("POST", "/v1/lazy/wait", { work: "/snapflow/lazy/fill", timeoutMs: 120_000 });
  await call("POST", "/v1/clear", { unmount: ["/snapflow/lazy/fill/fuse"], remove: ["/snapflow/lazy/fill"] });
  const warm: { fuseMs: number; mountMs: number }[] = [];
  for (let i = 0; i < Number(runs); i++) warm.push(await mountLower("/snapflow/lazy/warm"));

  mkdirSync(join(base, "m"));
  const plain: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < Number(runs); i++) {
    plain.push(await ms(() => runQuiet(["mount", "-t", "squashfs", "-o", "loop,ro", host("snapflow/staging/img.sqsh"), join(base, "m")])));
    await runQuiet(["umount", join(base, "m")]);
    bare.push(await ms(() => runQuiet(["true"])));
  }
  const row = (name: string, xs: { fuseMs: number; mountMs: number }[]) =>
    console.log(`${name}: helper exec → ready ${median(xs.map((x) => x.fuseMs))} ms, image mount over its FUSE file ${median(xs.map((x) => x.mountMs))} ms (medians of ${xs.length}; mounts ${xs.map((x) => x.mountMs).join(" ")})`);
  row("cache empty", cold);
  row("every chunk cached", warm);
  console.log(`mount(8) of the image from a plain file, spawned by the agent: ${median(plain)} ms; spawning true: ${median(bare)} ms`);
} finally {
  await call("DELETE", "/v1/sandbox").catch(() => {});
  server.closeAllConnections();
  server.close();
  await s3.stop();
  rmSync(base, { recursive: true, force: true });
}

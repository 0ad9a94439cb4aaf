// A delta layer through a base symlink, through the Workflows (issue 12). The base snapshot legitimately holds
// `link -> ../outside`; a compromised source sandbox makes its delta's archive hold only `link/evil` (no `link`
// entry), which GNU tar straight into the tree would write through the base's symlink into /workspace/outside.
// The tampered archive is put in the store under the delta's key, as the compromised sandbox's upload would; the
// restore then runs for real (presigned download piped into the agent's extractor) and must leave the sentinel
// outside the target, and the target's parent, as they were.
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { depsFrom } from "../../src/deps.ts";
import { agent, api, freshSandbox, putFile, runWorkflow } from "./helpers.ts";

/** A minimal ustar archive of files and symlinks (mtime 1700000000). */
function ustar(entries: { name: string; data?: string; link?: string }[]): Uint8Array {
  const enc = new TextEncoder();
  const blocks: Uint8Array[] = [];
  for (const e of entries) {
    const data = enc.encode(e.data ?? "");
    const h = new Uint8Array(512);
    const put = (off: number, s: string) => h.set(enc.encode(s), off);
    const oct = (off: number, len: number, v: number) => put(off, v.toString(8).padStart(len - 1, "0") + "\0");
    put(0, e.name);
    oct(100, 8, e.link ? 0o777 : 0o644);
    oct(108, 8, 0);
    oct(116, 8, 0);
    oct(124, 12, e.link ? 0 : data.length);
    oct(136, 12, 1700000000);
    put(148, "        ");
    put(156, e.link ? "2" : "0");
    if (e.link) put(157, e.link);
    put(257, "ustar\0");
    put(263, "00");
    oct(148, 7, h.reduce((a, b) => a + b, 0));
    blocks.push(h);
    if (!e.link) {
      const body = new Uint8Array(Math.ceil(data.length / 512) * 512);
      body.set(data);
      blocks.push(body);
    }
  }
  blocks.push(new Uint8Array(1024));
  const out = new Uint8Array(blocks.reduce((n, b) => n + b.length, 0));
  let o = 0;
  for (const b of blocks) (out.set(b, o), (o += b.length));
  return out;
}

/** A zstd frame holding `data` in raw (stored) blocks: what `zstd -d` reads, without a compressor here. */
function zstdStored(data: Uint8Array): Uint8Array {
  const parts: number[] = [0x28, 0xb5, 0x2f, 0xfd, 0xa0, ...[0, 8, 16, 24].map((s) => (data.length >>> s) & 0xff)];
  const max = 128 * 1024;
  for (let off = 0; off === 0 || off < data.length; off += max) {
    const chunk = data.subarray(off, off + max);
    const last = off + max >= data.length ? 1 : 0;
    const header = (chunk.length << 3) | last;
    parts.push(header & 0xff, (header >>> 8) & 0xff, (header >>> 16) & 0xff, ...chunk);
  }
  return new Uint8Array(parts);
}

async function extractInto(sandbox: string, path: string, tar: Uint8Array): Promise<void> {
  const { agentTokenFor } = await import("../../container/agent-token.ts");
  const r = await fetch(`${env.AGENT_URL}/v1/extract?path=${encodeURIComponent(path)}&kind=tar&compression=none`, {
    method: "PUT",
    headers: { authorization: `Bearer ${await agentTokenFor(env.AGENT_SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox },
    body: tar,
  });
  if (r.status !== 200) throw new Error(`extract: ${r.status} ${await r.text()}`);
}

const stat = (sandbox: string, path: string) => agent(sandbox, "GET", `/v1/stat?path=${encodeURIComponent(path)}`);

it("delta-through-base-symlink: a tampered delta layer holding link/evil writes nothing outside the target", async () => {
  const src = freshSandbox("hostile-src");
  await extractInto(src, "/workspace/app", ustar([{ name: "keep.txt", data: "base\n" }, { name: "link", link: "../outside" }]));
  const base = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
  await putFile(src, "/workspace/app/keep.txt", "changed\n");
  const delta = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: base.snapshotId });
  const record = (await api("GET", `/api/snapshots/${delta.snapshotId}`)).json;

  // The compromised source's delta: only link/evil, no entry for link itself.
  const evil = zstdStored(ustar([{ name: "link/evil", data: "written through the base's symlink\n" }]));
  await depsFrom(env).store.put(record.archive.key, evil);

  const dst = freshSandbox("hostile-dst");
  await putFile(dst, "/workspace/outside/sentinel", "sentinel\n");
  const parentBefore = (await stat(dst, "/workspace")).entries;
  await runWorkflow("restore", { snapshotId: delta.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "presigned-tar-zst-pipe" }, "errored").catch(() => {});

  expect(await stat(dst, "/workspace/outside/evil")).toEqual({ exists: false });
  expect(await stat(dst, "/workspace/outside")).toMatchObject({ exists: true, type: "dir", entries: 1 });
  const r = await fetch(`${env.AGENT_URL}/v1/files?path=${encodeURIComponent("/workspace/outside/sentinel")}`, {
    headers: { authorization: `Bearer ${await (await import("../../container/agent-token.ts")).agentTokenFor(env.AGENT_SECRET, dst)}`, "x-snapflow-sandbox": dst },
  });
  expect(await r.text()).toBe("sentinel\n");
  // The target's parent holds what it held (outside/) plus at most the target itself.
  expect((await stat(dst, "/workspace")).entries).toBeLessThanOrEqual(parentBefore + 1);
});

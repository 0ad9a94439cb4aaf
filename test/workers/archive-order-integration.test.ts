// One archive order, one truth (issue 22, case 3): a hard link is archived as a link to whichever of its names tar
// meets first, and the manifest says which name that is. Every full tar backup preset must make its archive from
// the walk its manifest comes from (sorted), never from tar's own pass over the directory (directory order), or
// the snapshot it records is refused by every one of its restores.
//
// The tree is made by extracting a plain tar through the agent, so the sandbox holds real hard links. Directory
// order on ext4 is the order of a hash of the names (tmpfs: creation order), so the tree holds many link pairs
// and the test first checks, with tar's own pass (GET /v1/archive without a list), that directory order puts the
// later name of at least one pair first: the case the manifest and a directory-order archive disagree on.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { STRATEGIES } from "../../src/strategies/registry.ts";
import { agent, freshSandbox, runWorkflow } from "./helpers.ts";

type TarEntry = { name: string; text: string } | { name: string; linkTo: string };

/** A plain ustar archive of `entries`, in that order (files 0644; hard links typeflag 1). */
function plainTar(entries: TarEntry[]): Uint8Array {
  const enc = new TextEncoder();
  const blocks: Uint8Array[] = [];
  const octal = (n: number, width: number) => n.toString(8).padStart(width - 1, "0") + "\0";
  for (const e of entries) {
    const body = "text" in e ? enc.encode(e.text) : new Uint8Array(0);
    const h = new Uint8Array(512);
    const put = (s: string, at: number) => h.set(enc.encode(s), at);
    put(e.name, 0);
    put(octal(0o644, 8), 100);
    put(octal(0, 8), 108);
    put(octal(0, 8), 116);
    put(octal(body.length, 12), 124);
    put(octal(1_700_000_000, 12), 136);
    put("        ", 148);
    put("text" in e ? "0" : "1", 156);
    if ("linkTo" in e) put(e.linkTo, 157);
    put("ustar\0", 257);
    put("00", 263);
    put(octal(h.reduce((a, b) => a + b, 0), 7) + " ", 148);
    blocks.push(h, body, new Uint8Array((512 - (body.length % 512)) % 512));
  }
  blocks.push(new Uint8Array(1024));
  const out = new Uint8Array(blocks.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of blocks) out.set(b, at), (at += b.length);
  return out;
}

/** Entry names of a plain tar, in archive order (`./` dropped), with each hard link's target. */
function tarNames(tar: Uint8Array): { name: string; linkTo?: string }[] {
  const dec = new TextDecoder();
  const field = (h: Uint8Array, at: number, len: number) => dec.decode(h.subarray(at, at + len)).replace(/\0.*$/s, "");
  const out: { name: string; linkTo?: string }[] = [];
  for (let at = 0; at + 512 <= tar.length; ) {
    const h = tar.subarray(at, at + 512);
    if (h.every((b) => b === 0)) break;
    const size = parseInt(field(h, 124, 12).trim() || "0", 8);
    const name = field(h, 0, 100).replace(/^\.\//, "");
    const type = String.fromCharCode(h[156]!);
    if (name && name !== ".") out.push({ name, ...(type === "1" ? { linkTo: field(h, 157, 100).replace(/^\.\//, "") } : {}) });
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

async function agentFetch(sandbox: string, path: string, init: RequestInit = {}): Promise<Response> {
  const r = await fetch(`${env.AGENT_URL}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${await agentTokenFor(env.AGENT_SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox },
  });
  if (!r.ok) throw new Error(`agent ${init.method ?? "GET"} ${path}: ${r.status} ${await r.text()}`);
  return r;
}

/**
 * The three files (hardlink-b a link to hardlink-a, and other), and 24 more pairs: `pair-NN-b` a link to
 * `pair-NN-a`, half of them archived b-first, so that directory order puts some pair's later name first whatever
 * the filesystem's hash seed or creation-order rule.
 */
function linkTree(): TarEntry[] {
  const entries: TarEntry[] = [{ name: "hardlink-a", text: "one inode, two names\n" }, { name: "hardlink-b", linkTo: "hardlink-a" }, { name: "other", text: "other\n" }];
  for (let i = 0; i < 24; i++) {
    const [a, b] = [`pair-${String(i).padStart(2, "0")}-a`, `pair-${String(i).padStart(2, "0")}-b`];
    entries.push(...(i % 2 ? [{ name: b, text: `pair ${i}\n` }, { name: a, linkTo: b }] : [{ name: a, text: `pair ${i}\n` }, { name: b, linkTo: a }]));
  }
  return entries;
}

/** Every full backup preset that makes a tar archive, each with the restore the API picks for it by default. */
const TAR_BACKUPS = STRATEGIES.filter((s) => s.kind === "backup" && s.format.kind === "tar" && !("delta" in s && s.delta)).map((s) => s.name);

describe("a tree whose directory order is not sorted order", () => {
  const src = freshSandbox("order-src");
  const tree = "/workspace/links";

  it("is made, and tar's own pass over it meets a link pair's later name first", async () => {
    await agentFetch(src, `/v1/extract?kind=tar&compression=none&path=${encodeURIComponent(tree)}`, { method: "PUT", body: plainTar(linkTree()) });
    const dirOrder = tarNames(new Uint8Array(await (await agentFetch(src, `/v1/archive?kind=tar&compression=none&path=${encodeURIComponent(tree)}`)).arrayBuffer()));
    // A link whose target sorts after it: the directory order meets the pair's later name first.
    const reversed = dirOrder.filter((e) => e.linkTo && e.linkTo > e.name).map((e) => `${e.name} -> ${e.linkTo}`);
    console.log(`directory order: ${dirOrder.map((e) => e.name).join(" ")}; links against sorted order: ${reversed.join(", ")}`);
    expect(reversed.length, "the filesystem listed every pair in sorted order: this tree does not test anything here").toBeGreaterThan(0);
    expect(TAR_BACKUPS).toContain("tar-zst-presigned-multipart");
  });

  it.each(TAR_BACKUPS)("%s: the snapshot it records restores, and the restored tree equals the source", async (strategy) => {
    const b = await runWorkflow("backup", { sandboxId: src, path: tree, strategy });
    const dst = freshSandbox("order-dst");
    const r = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/links" });
    expect(r.status, r.error).toBe("complete");
    const [a, c] = await Promise.all([agent(src, "POST", "/v1/manifest", { path: tree }), agent(dst, "POST", "/v1/manifest", { path: "/workspace/links" })]);
    expect(c.entries.map(({ stat: _s, ...e }: any) => e)).toEqual(a.entries.map(({ stat: _s, ...e }: any) => e));
    expect(a.entries.find((e: any) => e.path === "hardlink-b")).toMatchObject({ link: "hardlink-a" });
  });
});

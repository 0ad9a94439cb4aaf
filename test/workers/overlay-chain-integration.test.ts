// Layered sleep/wake (issue 24): a workspace woken from its latest snapshot (lazy-overlay-restore) lays the chain —
// the chunked image, then each overlay delta — read-only under a fresh upper, so each sleep (overlay-delta) uploads
// what changed since that wake, not since the image. Three cycles of wake → change (new files, an edit, a delete
// of an earlier cycle's file, a directory deleted and made again) → sleep; every wake is compared with an
// independent walk (Python's os.lstat and hashlib, test/fixtures/fidelity-tree.py) of the tree that slept. Then the
// chain's links are protected from deletion, and a chain past MAX_OVERLAY_CHAIN or with a missing link is refused.
import { env } from "cloudflare:workers";
import { afterAll, expect, it } from "vitest";
import { MAX_OVERLAY_CHAIN } from "../../container/contract/protocol.ts";
import { introspectWorkflow } from "cloudflare:test";
import { agent, api, armStoreFault, firedStoreFaults, freshSandbox, putFile as put, runWorkflow as run, testStore } from "./helpers.ts";

const PATH = "/workspace/app";
const used: string[] = [];
afterAll(async () => {
  for (const sandbox of used) await agent(sandbox, "DELETE", "/v1/sandbox").catch(() => {});
});

type Walked = { type: string; mode: number; uid: number; gid: number; size: number; mtimeNs: string; sha256?: string; target?: string };

/** The tree at PATH as Python sees it: what a restore must give back (mtimes in whole seconds: squashfs keeps those). */
async function walk(sandboxId: string): Promise<Record<string, Omit<Walked, "mtimeNs"> & { mtime: string }>> {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__fidelity`, { method: "POST", body: JSON.stringify({ op: "walk", sandboxId, path: PATH }) });
  if (!r.ok) throw new Error(await r.text());
  const tree = (await r.json()) as Record<string, Walked>;
  return Object.fromEntries(Object.entries(tree).map(([p, e]) => [p, { type: e.type, mode: e.mode, uid: e.uid, gid: e.gid, size: e.type === "dir" ? 0 : e.size, mtime: e.mtimeNs.slice(0, -9), ...(e.sha256 ? { sha256: e.sha256 } : {}), ...(e.target ? { target: e.target } : {}) }]));
}

/** Text that does not compress much (hex of a hash chain), `bytes` long. */
async function noise(seed: string, bytes: number): Promise<string> {
  let out = "";
  let h = new TextEncoder().encode(seed);
  while (out.length < bytes) {
    h = new Uint8Array(await crypto.subtle.digest("SHA-512", h));
    out += [...h].map((b) => b.toString(16).padStart(2, "0")).join("");
  }
  return out.slice(0, bytes);
}

const del = (sandbox: string, path: string) => agent(sandbox, "DELETE", `/v1/files?path=${encodeURIComponent(`${PATH}/${path}`)}`);

it("three sleep/wake cycles: each wake equals what slept, each sleep uploads its own change, links cannot be deleted", { timeout: 600_000 }, async () => {
  const src = freshSandbox("chain-src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "node-modules", seed: 24, files: 300, bytes: 8 * 2 ** 20 });
  const image = await run("backup", { sandboxId: src, path: PATH, strategy: "squashfs-chunked" });
  const first = await walk(src);
  const files = Object.keys(first).filter((p) => first[p]!.type === "file");
  const baseFile = files[0]!;
  const within = (p: string, d: string) => p.startsWith(`${d}/`);
  const dirs = Object.keys(first).filter((d) => first[d]!.type === "dir" && files.some((f) => within(f, d)) && !within(baseFile, d));
  const dirA = dirs[0]!;
  const dirB = dirs.find((d) => d !== dirA && !within(d, dirA) && !within(dirA, d))!;
  const deletedFirst = files.find((f) => f !== baseFile && !within(f, dirA) && !within(f, dirB))!;
  expect([dirA, dirB, deletedFirst].every(Boolean)).toBe(true);

  let latest: string = image.snapshotId;
  let slept = first;
  const uploaded: number[] = [];
  const chains: string[][] = [];
  for (let cycle = 1; cycle <= 3; cycle++) {
    // Wake in a fresh sandbox from the latest snapshot: the tree must be exactly what slept.
    const work = freshSandbox(`chain-w${cycle}`);
    used.push(work);
    const woken = await run("restore", { snapshotId: latest, sandboxId: work, path: PATH, strategy: "lazy-overlay-restore" });
    expect(woken.steps.transfer.layers).toBe(cycle);
    expect(await walk(work)).toEqual(slept);

    // Change it: 256 KiB new, one file edited, one deleted (cycles 2 and 3: a file the cycle before made), one
    // directory deleted and made again (cycle 2: the one cycle 1 made, so its mark hides a delta layer, not the image).
    await put(work, `${PATH}/cycle-${cycle}/new.txt`, await noise(`new ${cycle}`, 256 * 1024));
    await put(work, `${PATH}/cycle-${cycle}/kept.txt`, `cycle ${cycle}\n`);
    await put(work, `${PATH}/${baseFile}`, `edited in cycle ${cycle}\n`);
    await del(work, cycle === 1 ? deletedFirst : `cycle-${cycle - 1}/kept.txt`);
    const remade = cycle === 1 ? dirA : cycle === 2 ? "remade-1" : dirB;
    await del(work, remade);
    await put(work, `${PATH}/${remade}/again.txt`, `made again in cycle ${cycle}\n`);
    if (cycle === 1) await put(work, `${PATH}/remade-1/old.txt`, "made in cycle 1\n");
    expect(Object.keys(await walk(work)).filter((p) => p.startsWith(`${remade}/`))).toEqual([`${remade}/again.txt`]);

    // A sleep that names another parent than the snapshot the workspace was woken from is refused: its layer would
    // be recorded over a tree it was not taken on.
    if (cycle === 2) {
      const wrong = await run("backup", { sandboxId: work, path: PATH, strategy: "overlay-delta", baseSnapshotId: image.snapshotId }, "errored");
      expect(wrong.error).toContain(`was woken from ${latest}`);
    }
    // Sleep: only the upper, with the woken snapshot as its parent. Cycle 2 sleeps staged and PUT once
    // (overlay-delta-put; its delta hides a delta layer's directory, so its tar must carry the whiteouts): a chain
    // mixes both kinds. (compactAfter: this chain is not compacted; the test below compacts one)
    const strategy = cycle === 2 ? "overlay-delta-put" : "overlay-delta";
    const sleep = await run("backup", { sandboxId: work, path: PATH, strategy, baseSnapshotId: latest, compactAfter: MAX_OVERLAY_CHAIN });
    const record = (await api("GET", `/api/snapshots/${sleep.snapshotId}`)).json;
    expect(record.strategy).toBe(strategy);
    expect(record.delta.base).toBe(latest);
    chains.push(record.delta.chain);
    uploaded.push(record.archive.bytes);
    slept = await walk(work);
    latest = sleep.snapshotId;
  }
  // The chain grows by one link a cycle: the image, then each earlier delta.
  expect(chains.map((c) => c.length)).toEqual([1, 2, 3]);
  expect(chains[2]!.slice(0, 2)).toEqual(chains[1]);
  // Each sleep carries its own cycle's change (~256 KiB), not the sum of the cycles so far.
  expect(uploaded[2]!).toBeLessThan(2 * uploaded[0]!);
  console.log(`uploaded per sleep: ${uploaded.join(", ")} bytes`);

  // The last wake: three deltas over the image; a file made in cycle 1 and deleted in cycle 2 stays deleted, the
  // directory remade in cycle 2 holds only what cycle 2 put there.
  const last = freshSandbox("chain-last");
  used.push(last);
  const woken = await run("restore", { snapshotId: latest, sandboxId: last, path: PATH, strategy: "lazy-overlay-restore" });
  expect(woken.steps.transfer.layers).toBe(4);
  const tree = await walk(last);
  expect(tree).toEqual(slept);
  expect(tree["cycle-1/kept.txt"]).toBeUndefined();
  expect(tree["cycle-1/new.txt"]).toBeDefined();
  expect(Object.keys(tree).filter((p) => p.startsWith("remade-1/"))).toEqual(["remade-1/again.txt"]);

  // A link of the chain is not deleted while a later delta builds on it: 409 naming the child.
  const [, d1, d2] = chains[2]!;
  for (const [id, child] of [[image.snapshotId, d1], [d1, d2], [d2, latest]] as const) {
    const refused = await api("DELETE", `/api/snapshots/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.json.error.message).toContain(child);
  }
});

it("a chain past MAX_OVERLAY_CHAIN deltas, or with a link missing, is refused", async () => {
  // Records as the record step writes them (the store is the truth), so the bound is reached without 32 sleeps.
  const store = await testStore();
  const stamp = `${Date.now()}`.slice(-8).padStart(8, "0");
  const id = (i: number) => `bk-20261126${stamp.slice(0, 4)}${String(i).padStart(2, "0")}-${stamp.slice(4)}ab${String(i).padStart(2, "0")}`;
  const squashfs = { kind: "squashfs", compression: "zstd", level: 3, blockKiB: 128, chunks: { avg: 524288 } };
  const common = (i: number) => ({ id: id(i), status: "good", createdAt: new Date().toISOString(), source: { sandboxId: "chain-bound", path: PATH }, tenant: "default", steps: {} });
  const put = (i: number, record: object) => store.put(`snapshots/${id(i)}/snapshot.json`, JSON.stringify(record));
  await put(0, { ...common(0), strategy: "squashfs-chunked", format: squashfs, archive: { key: "x", bytes: 1, sha256: "0".repeat(64) }, manifest: { key: "m", files: 0, dirs: 0, symlinks: 0, bytes: 0 } });
  for (let i = 1; i <= MAX_OVERLAY_CHAIN; i++) {
    const chain = Array.from({ length: i }, (_, j) => id(j));
    await put(i, { ...common(i), strategy: "overlay-delta", format: { kind: "tar", compression: "zstd", level: 3 }, archive: { key: "x", bytes: 1, sha256: "0".repeat(64) }, manifest: { key: "m", files: 0, dirs: 0, symlinks: 0, bytes: 0, layerOf: id(i - 1) }, delta: { kind: "overlay-upper", base: id(i - 1), chain } });
  }
  const body = (base: string) => ({ sandboxId: "chain-bound", path: PATH, strategy: "overlay-delta", baseSnapshotId: base });
  const deepest = await api("POST", "/api/backups", body(id(MAX_OVERLAY_CHAIN)));
  expect(deepest.status).toBe(400);
  expect(deepest.json.error.field).toBe("baseSnapshotId");
  expect(deepest.json.error.message).toMatch(/at most 32/);

  // A link gone from the middle: the chain is unusable, for a sleep over it and for a wake of it.
  await store.delete(`snapshots/${id(5)}/snapshot.json`);
  const broken = await api("POST", "/api/backups", body(id(8)));
  expect(broken.status).toBe(422);
  expect(broken.json.error.message).toContain(id(5));
});

it("a chain compacted in the background: wakes resolve through the compaction and equal what slept, the compacted links can go, a failed compaction changes nothing", { timeout: 600_000 }, async () => {
  await using compactions = await introspectWorkflow(env.COMPACT_WORKFLOW);
  await compactions.modifyAll(async (m) => m.disableRetryDelays());
  const src = freshSandbox("cmp-src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "node-modules", seed: 25, files: 150, bytes: 3 * 2 ** 20 });
  const image = await run("backup", { sandboxId: src, path: PATH, strategy: "squashfs-chunked" });
  let latest: string = image.snapshotId;
  let slept = await walk(src);
  const wake = async (label: string, layers: number) => {
    const work = freshSandbox(label);
    used.push(work);
    const woken = await run("restore", { snapshotId: latest, sandboxId: work, path: PATH, strategy: "lazy-overlay-restore" });
    expect(woken.steps.transfer.layers, `${label}: layers laid`).toBe(layers);
    expect(await walk(work)).toEqual(slept);
    return work;
  };
  const sleep = async (work: string, compactAfter: number) => {
    const s = await run("backup", { sandboxId: work, path: PATH, strategy: "overlay-delta", baseSnapshotId: latest, compactAfter });
    slept = await walk(work);
    latest = s.snapshotId;
    return (await api("GET", `/api/snapshots/${s.snapshotId}`)).json;
  };

  // Two sleeps, not compacted as they go (compactAfter past their depth): d2's record names the chain [image, d1].
  // d2 deletes a file d1 made and a directory d1 made, then makes it again (a whiteout and an opaque directory).
  const w1 = await wake("cmp-w1", 1);
  await put(w1, `${PATH}/c1/kept.txt`, "cycle 1\n");
  await put(w1, `${PATH}/c1/dir/a.txt`, await noise("c1", 64 * 1024));
  const d1 = await sleep(w1, MAX_OVERLAY_CHAIN);
  const w2 = await wake("cmp-w2", 2);
  await del(w2, "c1/kept.txt");
  await del(w2, "c1/dir");
  await put(w2, `${PATH}/c1/dir/again.txt`, "made again in cycle 2\n");
  await put(w2, `${PATH}/c2/new.txt`, await noise("c2", 64 * 1024));
  const d2 = await sleep(w2, MAX_OVERLAY_CHAIN);
  expect(d2.delta.chain).toEqual([image.snapshotId, d1.id]);

  // d1 compacted (the Workflow a sleep starts when due, started here for d1 alone).
  expect((await api("GET", `/api/compactions/${d1.id}`)).json.status).toBe("none");
  await env.COMPACT_WORKFLOW.create({ id: `cp-${d1.id.slice(3)}`, params: { delta: d1.id, tenant: "default" } });
  await (await compactions.get())[0]!.waitForStatus("complete");
  const c1 = (await api("GET", `/api/compactions/${d1.id}`)).json;
  expect(c1.status).toBe("complete");
  expect(c1.compaction.compacts).toBe(d1.id);
  // Made by our compactor from a tree verified against d1's manifest: wakes through it do not hash it again.
  expect(c1.compaction.contentChecked).toMatchObject({ sandboxId: expect.stringMatching(/^compactor-/) });

  // d2 now wakes as [C(d1), d2]: its whiteout and opaque directory apply over the compaction's tree as over d1's.
  const w3 = await wake("cmp-w3", 2);
  // Its sleep records the chain as it resolved, and lies 2 deltas over the compaction: its own compaction is
  // started — and fails (the store refuses its index): nothing is recorded, nothing points at it.
  await put(w3, `${PATH}/c3/new.txt`, await noise("c3", 64 * 1024));
  const failing = { match: ["/snapshots/cp-", "archive.sqsh.index.json"], method: "PUT", action: "status" as const, status: 500, times: 1000 };
  await armStoreFault(failing);
  let d3;
  try {
    d3 = await sleep(w3, 2);
    expect(d3.delta.chain).toEqual([c1.id, d2.id]);
    const instances = await compactions.get();
    expect(instances).toHaveLength(2);
    await instances[1]!.waitForStatus("errored");
    const failed = (await api("GET", `/api/compactions/${d3.id}`)).json;
    expect(failed.status).toBe("errored");
    expect(failed.compaction).toBeUndefined();
    expect((await api("GET", `/api/snapshots/${failed.id}`)).status).toBe(404);
    expect((await firedStoreFaults(failed.id)).length).toBeGreaterThan(0);
  } finally {
    await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__faults?match=${encodeURIComponent(failing.match[0]!)}`, { method: "DELETE" });
  }
  await wake("cmp-w4", 3);

  // The compaction is needed while deltas resolve through it; the links it covers are not, and go (d1 was needed
  // only by d2, the image only by d1); d3 still wakes, from the compaction and the layers after it.
  const refused = await api("DELETE", `/api/snapshots/${c1.id}`);
  expect(refused.status).toBe(409);
  expect(refused.json.error.message).toContain(d2.id);
  for (const id of [d1.id, image.snapshotId]) expect((await api("DELETE", `/api/snapshots/${id}`)).status, id).toBe(200);
  await wake("cmp-w5", 3);
  expect((await api("DELETE", `/api/snapshots/${c1.id}`)).status).toBe(409);
});

// Over a chunked image the compaction re-images the tree; over a file-level snapshot it reads only what the layers
// hold (filecas lower.go): either way the tree it made is checked against the delta's manifest before anything
// points at it.
it.each([["squashfs-chunked", "lazy-overlay-restore"], ["files-cas", "files-overlay-restore"]])("a compaction over %s of a delta whose manifest lies about a file's content fails naming the file; nothing points at it", { timeout: 300_000 }, async (baseStrategy, wakeStrategy) => {
  await using compactions = await introspectWorkflow(env.COMPACT_WORKFLOW);
  await compactions.modifyAll(async (m) => m.disableRetryDelays());
  const src = freshSandbox("lie-src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "node-modules", seed: 26, files: 60, bytes: 2 ** 20 });
  const image = await run("backup", { sandboxId: src, path: PATH, strategy: baseStrategy });
  const work = freshSandbox("lie-w1");
  used.push(work);
  await run("restore", { snapshotId: image.snapshotId, sandboxId: work, path: PATH, strategy: wakeStrategy });
  await put(work, `${PATH}/c1/told.txt`, await noise("told", 32 * 1024));
  const d1 = await run("backup", { sandboxId: work, path: PATH, strategy: "overlay-delta", baseSnapshotId: image.snapshotId, compactAfter: MAX_OVERLAY_CHAIN });

  // The delta's manifest says another hash for the file it added, and its record's SHA-256 is made to match: what
  // a compromised sandbox that slept could store. The image the compaction makes holds the file's real bytes.
  const store = await testStore();
  const record = (await api("GET", `/api/snapshots/${d1.snapshotId}`)).json;
  const text = await new Response((await store.get(record.manifest.key))!.body).text();
  const told = JSON.parse(text).entries.find((e: { path: string }) => e.path === "c1/told.txt");
  expect(told?.sha256).toMatch(/^[0-9a-f]{64}$/);
  const lying = text.replace(told.sha256, "0".repeat(64));
  const lyingSha = [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(lying)))].map((b) => b.toString(16).padStart(2, "0")).join("");
  await store.put(record.manifest.key, lying);
  const recordKey = `snapshots/${d1.snapshotId}/snapshot.json`;
  const stored = JSON.parse(await new Response((await store.get(recordKey))!.body).text());
  await store.put(recordKey, JSON.stringify({ ...stored, manifest: { ...stored.manifest, sha256: lyingSha } }));

  await env.COMPACT_WORKFLOW.create({ id: `cp-${d1.snapshotId.slice(3)}`, params: { delta: d1.snapshotId, tenant: "default" } });
  // Until it ends, whichever way (a compaction that believed the manifest would complete).
  let failed;
  for (let i = 0; i < 600 && ["running", "none"].includes((failed = (await api("GET", `/api/compactions/${d1.snapshotId}`)).json).status); i++) await new Promise((r) => setTimeout(r, 100));
  expect(failed.status).toBe("errored");
  expect(failed.error).toMatch(/differs from snapshot .*c1\/told\.txt \(sha256\)/);
  expect(failed.compaction).toBeUndefined();
  expect((await api("GET", `/api/snapshots/${failed.id}`)).status).toBe(404);
});

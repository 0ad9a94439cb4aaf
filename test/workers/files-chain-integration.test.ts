// Sleep/wake over the file-level format (issue 24): a workspace backed up as files-cas wakes with
// files-overlay-restore (its index served lazily by files-mount, the chain's deltas laid over it, a fresh upper),
// sleeps as overlay-delta, and its chain is compacted into a new file-level snapshot that reads only what the
// deltas changed: the rest keeps the base's chunk lists unread (native/lazy/internal/filecas/lower.go). Every wake is
// compared with an independent walk (Python's os.lstat and hashlib) of the tree that slept.
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { afterAll, expect, it } from "vitest";
import { FILES_MAX_DEPTH, MAX_OVERLAY_CHAIN } from "../../container/contract/protocol.ts";
import { depsFrom } from "../../src/deps.ts";
import { agent, api, armAgentFault, firedAgentFaults, freshSandbox, putFile as put, runWorkflow as run } from "./helpers.ts";

const PATH = "/workspace/app";
const used: string[] = [];
afterAll(async () => {
  for (const sandbox of used) await agent(sandbox, "DELETE", "/v1/sandbox").catch(() => {});
});

type Walked = { type: string; mode: number; size: number; mtimeNs: string; sha256?: string; target?: string };

/** The tree at PATH as Python sees it (mtimes in whole seconds: what every format keeps). */
async function walk(sandboxId: string) {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__fidelity`, { method: "POST", body: JSON.stringify({ op: "walk", sandboxId, path: PATH }) });
  if (!r.ok) throw new Error(await r.text());
  const tree = (await r.json()) as Record<string, Walked>;
  return Object.fromEntries(Object.entries(tree).map(([p, e]) => [p, { type: e.type, mode: e.mode, size: e.type === "dir" ? 0 : e.size, mtime: e.mtimeNs.slice(0, -9), ...(e.sha256 ? { sha256: e.sha256 } : {}), ...(e.target ? { target: e.target } : {}) }]));
}

const del = (sandbox: string, path: string) => agent(sandbox, "DELETE", `/v1/files?path=${encodeURIComponent(`${PATH}/${path}`)}`);

it("a file-level chain: wakes equal what slept, and its compaction reads only the names its deltas changed", { timeout: 600_000 }, async () => {
  await using compactions = await introspectWorkflow(env.COMPACT_WORKFLOW);
  await compactions.modifyAll(async (m) => m.disableRetryDelays());
  const src = freshSandbox("fchain-src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "node-modules", seed: 31, files: 150, bytes: 3 * 2 ** 20 });
  // The chain's base is itself a layer (an incremental's index over its parent's, filecas layer.go): every wake reads
  // its index chain, and the compaction's pass reads it as its base.
  const first = await run("backup", { sandboxId: src, path: PATH, strategy: "files-cas" });
  await put(src, `${PATH}/zz/layered.txt`, "in the base's layer\n"); // last in walk order: no cycle touches it
  const base = await run("backup", { sandboxId: src, path: PATH, strategy: "files-cas" });
  expect((await api("GET", `/api/snapshots/${base.snapshotId}`)).json.files.chain).toHaveLength(1);
  let latest: string = base.snapshotId;
  let slept = await walk(src);
  const baseFiles = Object.keys(slept).filter((p) => slept[p]!.type === "file");
  const wake = async (label: string, layers: number) => {
    const work = freshSandbox(label);
    used.push(work);
    const woken = await run("restore", { snapshotId: latest, sandboxId: work, path: PATH, strategy: "files-overlay-restore" });
    expect(woken.steps.transfer.layers, `${label}: layers laid`).toBe(layers);
    // A base alone is swapped in at the end of the transfer (a step sooner); under tar deltas, by materialize.
    const swappedBy = layers === 1 ? "transfer" : "materialize";
    expect(woken.steps[swappedBy].usableMs, `${label}: usable before verify, at the end of ${swappedBy}`).toBeGreaterThan(0);
    expect(await walk(work), `${label}: the woken tree`).toEqual(slept);
    return work;
  };
  const sleep = async (work: string) => {
    const s = await run("backup", { sandboxId: work, path: PATH, strategy: "overlay-delta", baseSnapshotId: latest, compactAfter: MAX_OVERLAY_CHAIN });
    slept = await walk(work);
    latest = s.snapshotId;
    return (await api("GET", `/api/snapshots/${s.snapshotId}`)).json;
  };

  // Two sleeps: a base file edited at its own size (only the layer can tell), new files, then a whiteout and an
  // opaque directory (a file and a directory d1 made, deleted; the directory made again).
  const w1 = await wake("fchain-w1", 1);
  const edited = baseFiles[0]!;
  await put(w1, `${PATH}/${edited}`, "x".repeat(slept[edited]!.size));
  await put(w1, `${PATH}/c1/kept.txt`, "cycle 1\n");
  await put(w1, `${PATH}/c1/dir/a.txt`, "a".repeat(64 * 1024));
  const d1 = await sleep(w1);
  const w2 = await wake("fchain-w2", 2);
  await del(w2, "c1/kept.txt");
  await del(w2, "c1/dir");
  await del(w2, baseFiles[1]!);
  await put(w2, `${PATH}/c1/dir/again.txt`, "made again in cycle 2\n");
  await put(w2, `${PATH}/c2/new.txt`, "b".repeat(64 * 1024));
  const d2 = await sleep(w2);
  expect(d2.delta.chain).toEqual([base.snapshotId, d1.id]);

  // d2's chain compacted: a file-level snapshot over the base's packs and a pack of its own, that read only the
  // files the deltas hold (the edit, the new ones), not the tree.
  await env.COMPACT_WORKFLOW.create({ id: `cp-${d2.id.slice(3)}`, params: { delta: d2.id, tenant: "default" } });
  await (await compactions.get())[0]!.waitForStatus("complete");
  const c2 = (await api("GET", `/api/compactions/${d2.id}`)).json;
  expect(c2.status).toBe("complete");
  const compaction = c2.compaction;
  expect(compaction.format.kind).toBe("files");
  expect(compaction.compacts).toBe(d2.id);
  expect(compaction.files.read.files).toBeLessThanOrEqual(4);
  expect(compaction.files.reused.files).toBeGreaterThanOrEqual(baseFiles.length - 3);
  expect(compaction.files.packs.map((x: { name: string }) => x.name).sort()).toEqual([first.snapshotId, base.snapshotId, compaction.id].sort());
  // A compaction writes a whole index: nothing beneath it.
  expect(compaction.files.chain).toBeUndefined();

  // A sleep over d2 records the compaction as its chain, and wakes as [C, d3]: exact.
  const w3 = await wake("fchain-w3", 3);
  await put(w3, `${PATH}/c3/new.txt`, "c".repeat(32 * 1024));
  const d3 = await sleep(w3);
  expect(d3.delta.chain).toEqual([compaction.id]);
  await wake("fchain-w4", 2);
  // What the compaction covers can go (d3 resolves through it), the base and its parent too: the compaction's index
  // still finds their packs (kept while a record names them: pack-gc.ts).
  for (const id of [d2.id, d1.id, base.snapshotId, first.snapshotId]) expect((await api("DELETE", `/api/snapshots/${id}`)).status, id).toBe(200);
  await wake("fchain-w5", 2);
});

// A wake that sleeps as files-cas: the backup of the overlay reads only the names the wake's upper holds and stores a
// layer of the woken snapshot's index (files.ts wakeBase, filecas lower.go), so the next wake mounts a chain of index
// objects with nothing to extract. Once the overlay is gone from the path, the lineage's wake is not believed: the
// tree there is walked whole.
it("a file-level sleep of a wake reads only what changed since the wake, and stores a layer", { timeout: 300_000 }, async () => {
  const src = freshSandbox("fsleep-src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "node-modules", seed: 33, files: 150, bytes: 3 * 2 ** 20 });
  const base = await run("backup", { sandboxId: src, path: PATH, strategy: "files-cas" });
  let slept = await walk(src);
  const files = Object.keys(slept).filter((p) => slept[p]!.type === "file");
  const record = async (id: string) => (await api("GET", `/api/snapshots/${id}`)).json;
  const rb = await record(base.snapshotId);

  const w1 = freshSandbox("fsleep-w1");
  used.push(w1);
  const woke = await run("restore", { snapshotId: base.snapshotId, sandboxId: w1, path: PATH, strategy: "files-overlay-restore" });
  expect(await walk(w1)).toEqual(slept);
  // Its first restore outside its source: every file hashed where it is served (the engine's files-check), not walked.
  expect(woke.steps.verify.verified).toMatchObject({ content: "index-hash", metadata: "index", hashed: { files: files.length } });
  expect((await record(base.snapshotId)).contentChecked).toMatchObject({ sandboxId: w1 });
  await put(w1, `${PATH}/${files[0]}`, "edited after the wake\n");
  await put(w1, `${PATH}/s1/new.txt`, "n".repeat(40_000));
  await del(w1, files[1]!);
  const s1 = await run("backup", { sandboxId: w1, path: PATH, strategy: "files-cas" });
  expect(s1.steps.transfer.overWake).toEqual({ restoreId: woke.id, deltas: 0 });
  const r1 = await record(s1.snapshotId);
  expect(r1.files.parent).toBe(base.snapshotId);
  expect(r1.files.read.files).toBe(2);
  expect(r1.files.chain).toEqual([{ key: rb.archive.key, sha256: rb.archive.sha256 }]);
  expect(r1.archive.bytes).toBeLessThan(rb.archive.bytes / 4);
  slept = await walk(w1);

  // The same overlay sleeps again: its parent is the sleep before, and only the new name is read.
  await put(w1, `${PATH}/s2/later.txt`, "l".repeat(20_000));
  const s2 = await run("backup", { sandboxId: w1, path: PATH, strategy: "files-cas" });
  const r2 = await record(s2.snapshotId);
  expect(r2.files.parent).toBe(s1.snapshotId);
  expect(r2.files.read.files).toBe(1);
  expect(r2.files.chain).toHaveLength(2);
  slept = await walk(w1);

  // Each wakes exact: lazily over its chain, and extracted whole. s2's index beneath it (s1's) was never checked
  // outside w1: its first wake elsewhere hashes every file.
  const w2 = freshSandbox("fsleep-w2");
  used.push(w2);
  const again = await run("restore", { snapshotId: s2.snapshotId, sandboxId: w2, path: PATH, strategy: "files-overlay-restore" });
  expect(again.steps.transfer.layers).toBe(1);
  expect(await walk(w2)).toEqual(slept);
  expect(again.steps.verify.verified).toMatchObject({ content: "index-hash", hashed: { files: Object.values(slept).filter((e) => e.type === "file").length } });
  // Checked now, s2 wakes elsewhere trusting its index (not walked, not hashed); and it is the index beneath that
  // wake's sleep, whose first wake elsewhere hashes only its layer's files.
  const w2b = freshSandbox("fsleep-w2b");
  used.push(w2b);
  const trusted = await run("restore", { snapshotId: s2.snapshotId, sandboxId: w2b, path: PATH, strategy: "files-overlay-restore" });
  expect(trusted.steps.verify.verified).toMatchObject({ content: "chunk-sha256", metadata: "index" });
  expect(await walk(w2b)).toEqual(slept);
  await put(w2b, `${PATH}/s3/third.txt`, "t".repeat(30_000));
  await put(w2b, `${PATH}/${files[2]}`, "edited in w2\n");
  const s3 = await run("backup", { sandboxId: w2b, path: PATH, strategy: "files-cas" });
  expect((await record(s3.snapshotId)).files.chain.at(-1)).toEqual({ key: (await record(s2.snapshotId)).archive.key, sha256: (await record(s2.snapshotId)).archive.sha256 });
  const w3 = freshSandbox("fsleep-w3");
  used.push(w3);
  const third = await run("restore", { snapshotId: s3.snapshotId, sandboxId: w3, path: PATH, strategy: "files-overlay-restore" });
  expect(third.steps.verify.verified).toMatchObject({ content: "layer-hash", metadata: "index", hashed: { files: 2, bytes: 30_000 + "edited in w2\n".length } });
  expect(third.steps.verify.verified.by).toMatch(new RegExp(`the index beneath it, ${s2.snapshotId}'s, was checked`));
  expect((await record(s3.snapshotId)).contentChecked).toMatchObject({ sandboxId: w3 });
  // The engine's check reads the tree where it is served: a layer's file that is not what the index says is named.
  const r3 = await record(s3.snapshotId);
  const url = (key: string) => depsFrom(env).presigner.url(key, "GET");
  const index = { url: await url(r3.archive.key), sha256: r3.archive.sha256, chain: await Promise.all(r3.files.chain.map(async (o: { key: string; sha256: string }) => ({ url: await url(o.key), sha256: o.sha256 }))) };
  await put(w3, `${PATH}/s3/third.txt`, "T".repeat(30_000));
  await put(w3, `${PATH}/${files[3]}`, "not in the layer: not read\n");
  const lie = await agent(w3, "POST", "/v1/files/check", { path: PATH, index, layerOnly: true });
  expect(lie).toMatchObject({ equal: false, files: 2, counts: { changed: 1, missing: 0 }, differences: [{ path: "s3/third.txt", kind: "changed", field: "sha256" }] });
  await agent(w3, "DELETE", `/v1/mounts?path=${encodeURIComponent(PATH)}`);
  const x = freshSandbox("fsleep-x");
  used.push(x);
  await run("restore", { snapshotId: s2.snapshotId, sandboxId: x, path: PATH, strategy: "files-extract", deepVerify: true });
  expect(await walk(x)).toEqual(slept);

  // The overlay taken down: what is at the path now (its empty mount point) is what the next backup stores, however
  // the lineage still names the wake.
  await agent(w2, "DELETE", `/v1/mounts?path=${encodeURIComponent(PATH)}`);
  const bare = await run("backup", { sandboxId: w2, path: PATH, strategy: "files-cas" });
  expect(bare.steps.transfer.overWake).toBeUndefined();
  const rbare = await record(bare.snapshotId);
  expect(rbare.files.parent).toBe(s2.snapshotId);
  expect(rbare.manifest.files).toBe(0);
});

// A wake finds its base's mount gone (the helper stopped, as an agent restart stops it) when it lays the overlay,
// at the end of its transfer: the swap's 404 naming the lower starts files-mount again, and the wake completes, exact.
it("a wake whose file-level base went before its overlay was laid mounts it again", { timeout: 120_000 }, async () => {
  const src = freshSandbox("fgone-src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "node-modules", seed: 35, files: 40, bytes: 400_000 });
  const base = await run("backup", { sandboxId: src, path: PATH, strategy: "files-cas" });
  const work = freshSandbox("fgone-w");
  used.push(work);
  // The swap's request held at the agent's door while the test takes the base's mount down.
  await armAgentFault(work, { method: "POST", match: "/v1/swap/in", action: "stall", afterBytes: 0, ms: 3000, times: 1 });
  const woke = run("restore", { snapshotId: base.snapshotId, sandboxId: work, path: PATH, strategy: "files-overlay-restore" });
  for (let i = 0; !(await firedAgentFaults(work, "/v1/swap/in")).length; i++) {
    if (i > 200) throw new Error("the swap was never asked");
    await new Promise((r) => setTimeout(r, 50));
  }
  const lazy = (await agent(work, "GET", "/v1/mounts")).mounts.filter((m: { kind: string }) => m.kind === "lazy");
  expect(lazy).toHaveLength(1);
  await agent(work, "DELETE", `/v1/mounts?path=${encodeURIComponent(lazy[0].path)}`);
  const done = await woke;
  expect(done.steps.transfer.remountedBase).toBe(true);
  expect(done.steps.transfer.swappedIn).toBe(true);
  expect(await walk(work)).toEqual(await walk(src));
});

// Sleeps past FILES_MAX_DEPTH: the ninth layer lies over the chain's whole index (depth 1), holding what the eight
// between changed, and wakes exact — lazily and extracted.
it("a sleep over a chain FILES_MAX_DEPTH deep stores a layer over the whole index, not the whole index", { timeout: 300_000 }, async () => {
  const src = freshSandbox("frebase-src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "node-modules", seed: 37, files: 600, bytes: 2 * 2 ** 20 });
  const base = await run("backup", { sandboxId: src, path: PATH, strategy: "files-cas" });
  const rb = (await api("GET", `/api/snapshots/${base.snapshotId}`)).json;
  const w = freshSandbox("frebase-w");
  used.push(w);
  await run("restore", { snapshotId: base.snapshotId, sandboxId: w, path: PATH, strategy: "files-overlay-restore" });
  let last: any;
  for (let i = 1; i <= FILES_MAX_DEPTH + 1; i++) {
    await put(w, `${PATH}/sleeps/${i}.txt`, `sleep ${i}\n`.repeat(100));
    if (i === 4) await del(w, "package.json");
    const s = await run("backup", { sandboxId: w, path: PATH, strategy: "files-cas" });
    last = (await api("GET", `/api/snapshots/${s.snapshotId}`)).json;
    expect(last.files.read.files, `sleep ${i}`).toBe(1);
    expect(last.files.chain, `sleep ${i}`).toHaveLength(i <= FILES_MAX_DEPTH ? i : 1);
  }
  expect(last.files.chain).toEqual([{ key: rb.archive.key, sha256: rb.archive.sha256 }]);
  expect(last.archive.bytes).toBeLessThan(rb.archive.bytes / 4);
  const slept = await walk(w);
  for (const strategy of ["files-overlay-restore", "files-extract"]) {
    const x = freshSandbox("frebase-x");
    used.push(x);
    await run("restore", { snapshotId: last.id, sandboxId: x, path: PATH, strategy, deepVerify: strategy === "files-extract" });
    expect(await walk(x), strategy).toEqual(slept);
  }
});

// The agent's chunk and lazy-mount routes against the real helper (native/lazy/bin/snapflow-lazy), a real S3 server
// (SeaweedFS) and real mounts (FUSE, kernel squashfs through a loop device). What the Workflow tests cannot see from
// inside workerd is checked here on the host: a read of a damaged chunk fails with EIO (no wrong byte is served),
// the store refuses a chunk whose bytes do not match the hash its URL binds, bad requests name their field, and
// unmounting leaves no mount and no helper process behind.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import type { ChunkIndex, LazyStatus, MountEntry } from "../../container/contract/protocol.ts";
import { readMountinfo } from "../../container/mounts/mounts.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { startObjectStore, type ObjectStoreServer } from "../../scripts/stack/object-store-server.ts";
import { s3Presigner, type Presigner } from "../../src/store/presigner.ts";
import { s3Store } from "../../src/store/s3-store.ts";

const SECRET = randomBytes(32).toString("hex");
const SB = "lazy";
const sha256Hex = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
let base: string;
let s3: ObjectStoreServer;
let server: Server;
let agentUrl: string;
let presigner: Presigner;
let store: ReturnType<typeof s3Store>;
const host = (path: string) => join(base, "sandboxes", SB, path);

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-lazy-"));
  s3 = await startObjectStore({ dir: join(base, "s3"), bucket: "lazy-test", log: () => {} });
  const settings = { endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  presigner = s3Presigner(settings, 900);
  store = s3Store(settings);
  // The sandboxes' directory is reached through a symlink (as a checkout whose .snapflow is one): the registry keeps
  // canonical paths, and every lookup must too (a remount once missed its own helper this way and began again).
  mkdirSync(join(base, "sandboxes-real"));
  symlinkSync(join(base, "sandboxes-real"), join(base, "sandboxes"));
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: [s3.endpoint] });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await call("DELETE", "/v1/sandbox").catch(() => {});
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await s3?.stop();
  rmSync(base, { recursive: true, force: true });
  // Unmounting stops the FUSE helper, which can take seconds on a loaded machine.
}, 60_000);

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`${agentUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SB)}`, "x-snapflow-sandbox": SB, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const FORMAT = { kind: "squashfs", compression: "zstd", level: 3, chunks: { avg: 512 * 1024 } } as const;
let index: ChunkIndex;

it("indexes a staged image and uploads only the chunks it is given URLs for, each bound to its SHA-256", async () => {
  expect((await call("POST", "/v1/datasets", { path: "/workspace/src", kind: "added-data", seed: 51, files: 200, bytes: 1e6, addedBytes: 4e6 })).status).toBe(200);
  const image = await call("POST", "/v1/image", { path: "/workspace/src", output: "/snapflow/staging/img.sqsh", format: FORMAT });
  expect(image.status).toBe(200);
  const indexed = await call("POST", "/v1/chunks/index", { image: "/snapflow/staging/img.sqsh", output: "/snapflow/staging/img.index.json", avg: FORMAT.chunks.avg });
  expect(indexed.status).toBe(200);
  index = indexed.body.index;
  expect(index.sha256).toBe(image.body.sha256);
  expect(index.chunks.length).toBeGreaterThan(3);

  const bad = [
    [{ image: "/snapflow/staging/img.sqsh", index: "/snapflow/staging/img.index.json", urls: { "not-a-digest": "http://x" } }, /^urls/],
    [{ image: "/snapflow/staging/img.sqsh", index: "/snapflow/staging/img.index.json", urls: { [index.chunks[0]!.sha256]: "http://169.254.169.254/latest" } }, new RegExp(`^urls\\.${index.chunks[0]!.sha256}$`)],
    [{ image: "/snapflow/staging/nothing.sqsh", index: "/snapflow/staging/img.index.json", urls: {} }, /^image$/],
  ] as const;
  for (const [body, field] of bad) {
    const r = await call("POST", "/v1/chunks/upload", body);
    expect(r.status, JSON.stringify(r.body)).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.body.error.field).toMatch(field);
  }

  // A URL bound to another chunk's hash: the store refuses the bytes, and the upload fails.
  const [first, second] = index.chunks;
  const lying = await call("POST", "/v1/chunks/upload", {
    image: "/snapflow/staging/img.sqsh", index: "/snapflow/staging/img.index.json",
    urls: { [first!.sha256]: await presigner.url(`chunks/${first!.sha256}`, "PUT", { sha256: second!.sha256 }) }, retries: 0,
  });
  expect(lying.status).toBe(500);
  expect(await store.head(`chunks/${first!.sha256}`)).toBeNull();

  const distinct = [...new Set(index.chunks.map((c) => c.sha256))];
  const urls = Object.fromEntries(await Promise.all(distinct.map(async (d) => [d, await presigner.url(`chunks/${d}`, "PUT", { sha256: d })])));
  const up = await call("POST", "/v1/chunks/upload", { image: "/snapflow/staging/img.sqsh", index: "/snapflow/staging/img.index.json", urls });
  expect(up.body).toMatchObject({ chunks: distinct.length, bytes: index.size });
});

it("a lazy mount serves verified bytes; a damaged chunk's read fails with EIO; unmounting stops the helper", async () => {
  // Damage one chunk in the middle, as the store might: same length, other bytes.
  const victim = index.chunks[Math.floor(index.chunks.length / 2)]!;
  await store.put(`chunks/${victim.sha256}`, new Uint8Array(victim.size).fill(7));
  const distinct = [...new Set(index.chunks.map((c) => c.sha256))];
  const urls = Object.fromEntries(await Promise.all(distinct.map(async (d) => [d, await presigner.url(`chunks/${d}`, "GET")])));
  const indexFile = await fetch(`${agentUrl}/v1/files?path=/snapflow/images/r1.index.json`, {
    method: "PUT", headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SB)}`, "x-snapflow-sandbox": SB }, body: JSON.stringify(index),
  });
  expect(indexFile.status).toBe(200);

  const refused = await call("POST", "/v1/lazy/mount", { index: "/snapflow/images/r1.index.json", urls: { ZZ: "x" }, work: "/snapflow/lazy/r1", cache: "/snapflow/chunks", path: "/workspace/app", format: FORMAT });
  expect(refused.status).toBe(400);
  expect(refused.body.error.field).toMatch(/^urls/);

  // prefetch 0: only reads fetch, so the damaged chunk is met by a read, not by the prefetcher.
  const mounted = await call("POST", "/v1/lazy/mount", { index: "/snapflow/images/r1.index.json", urls, work: "/snapflow/lazy/r1", cache: "/snapflow/chunks", path: "/workspace/app", format: FORMAT, prefetch: 0 });
  expect(mounted.status, JSON.stringify(mounted.body)).toBe(200);
  expect(mounted.body.mounted.map((m: MountEntry) => m.kind)).toEqual(["lazy", "image"]);
  console.log(`lazy mount: ${mounted.body.ms} ms (helper ready ${mounted.body.readyMs} ms, exec → ready line ${mounted.body.fuseMs} ms, ${mounted.body.how} ${mounted.body.mountMs} ms)`);

  // Read every file of the mounted tree the way a program would. Every byte served must be the source's.
  const errors: string[] = [];
  let same = 0;
  const walk = (dir: string) => {
    for (const name of readdirSync(join(host("/workspace/app"), dir))) {
      const rel = join(dir, name);
      if (statSync(host(`/workspace/app/${rel}`), { throwIfNoEntry: false })?.isDirectory()) walk(rel);
      else if (errors.length < 2) {
        // (Each read of the damaged chunk retries it — a failure is not sticky — so two are enough.)
        try {
          const got = readFileSync(host(`/workspace/app/${rel}`));
          expect(sha256Hex(got), rel).toBe(sha256Hex(readFileSync(host(`/workspace/src/${rel}`))));
          same++;
        } catch (e) {
          errors.push((e as NodeJS.ErrnoException).code ?? String(e));
        }
      }
    }
  };
  walk("");
  expect(same).toBeGreaterThan(0);
  expect(errors.length).toBeGreaterThan(0);
  expect(new Set(errors)).toEqual(new Set(["EIO"]));

  const status = (await call("POST", "/v1/lazy/wait", { work: "/snapflow/lazy/r1", timeoutMs: 0 })).body as LazyStatus;
  expect(status.prefetch).toBe("off");
  expect(status.failed.map((f) => f.sha256)).toEqual([victim.sha256]);
  expect(status.failed[0]!.reason).toContain("invalid");
  expect(status.chunks.onDemand).toBeGreaterThan(0);

  // Taking the FUSE file down takes the image on it down first, and the helper exits.
  const down = await call("DELETE", `/v1/mounts?path=${encodeURIComponent("/snapflow/lazy/r1/fuse")}`);
  expect(down.body.unmounted).toEqual(["/workspace/app", "/snapflow/lazy/r1/fuse"]);
  expect((await readMountinfo()).filter((m) => m.mountPoint.startsWith(base))).toEqual([]);
  expect(helpers(host("/snapflow/lazy/r1"))).toEqual([]);
  expect((await call("GET", "/v1/mounts")).body.mounts).toEqual([]);
});

it("a lazy mount asked with `clear` takes down what an earlier attempt left first, in the same call", async () => {
  const distinct = [...new Set(index.chunks.map((c) => c.sha256))];
  const urls = Object.fromEntries(await Promise.all(distinct.map(async (d) => [d, await presigner.url(`chunks/${d}`, "GET")])));
  const body = { index: "/snapflow/images/r1.index.json", urls, work: "/snapflow/lazy/r2", cache: "/snapflow/chunks", path: "/workspace/app2", format: FORMAT, prefetch: 0 };
  const first = await call("POST", "/v1/lazy/mount", body);
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  // What a retried materialize meets: the earlier attempt's mounts. Asked again as it was, the mount is refused.
  const again = await call("POST", "/v1/lazy/mount", body);
  expect(again.status, JSON.stringify(again.body)).toBeGreaterThanOrEqual(400);
  const cleared = await call("POST", "/v1/lazy/mount", { ...body, clear: { unmount: ["/workspace/app2", "/snapflow/lazy/r2/fuse"], remove: ["/snapflow/lazy/r2"] } });
  expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
  // One tree, one helper: the earlier ones went first.
  const mine = (await call("GET", "/v1/mounts")).body.mounts.filter((m: MountEntry) => m.path === "/workspace/app2" || m.path.startsWith("/snapflow/lazy/r2"));
  expect(mine.map((m: MountEntry) => [m.path, m.kind])).toEqual([["/snapflow/lazy/r2/fuse", "lazy"], ["/workspace/app2", "image"]]);
  expect(helpers(host("/snapflow/lazy/r2"))).toHaveLength(1);
  // A clear that names a path outside the sandbox is refused, naming its field under clear, and mounts nothing.
  const outside = await call("POST", "/v1/lazy/mount", { ...body, path: "/workspace/app3", work: "/snapflow/lazy/r3", clear: { unmount: [], remove: ["../../etc"] } });
  expect(outside.status).toBe(400);
  expect(outside.body.error.field).toMatch(/^clear\./);
  expect(helpers(host("/snapflow/lazy/r3"))).toEqual([]);
  await call("DELETE", `/v1/mounts?path=${encodeURIComponent("/snapflow/lazy/r2/fuse")}`);
  expect(helpers(host("/snapflow/lazy/r2"))).toEqual([]);
});

it("an unmount from outside ends the helper too, and a mount that cannot read its image leaves nothing behind", async () => {
  await store.put(`chunks/${index.chunks.at(-1)!.sha256}`, new Uint8Array(index.chunks.at(-1)!.size)); // the tables
  const distinct = [...new Set(index.chunks.map((c) => c.sha256))];
  const urls = Object.fromEntries(await Promise.all(distinct.map(async (d) => [d, await presigner.url(`chunks/${d}`, "GET")])));
  rmSync(host("/snapflow/chunks"), { recursive: true, force: true }); // a cold cache: every chunk comes from the store
  const failed = await call("POST", "/v1/lazy/mount", { index: "/snapflow/images/r1.index.json", urls, work: "/snapflow/lazy/r2", cache: "/snapflow/chunks", path: "/workspace/app2", format: FORMAT, prefetch: 0 });
  expect(failed.status).toBe(422);
  expect(failed.body.error.message).toContain(index.chunks.at(-1)!.sha256);
  expect((await readMountinfo()).filter((m) => m.mountPoint.startsWith(base))).toEqual([]);
  expect(helpers(host("/snapflow/lazy/r2"))).toEqual([]);

  // Put every chunk right again (from the staged image), mount, let it complete, then unmount behind the agent's back.
  const image = readFileSync(host("/snapflow/staging/img.sqsh"));
  for (const c of index.chunks) await store.put(`chunks/${c.sha256}`, image.subarray(c.offset, c.offset + c.size));
  // Without a path only the FUSE file is made; a restore's swap then puts an empty directory at its target and
  // mounts the image there in the same call, and asked again (a retried swap) the mount standing there is the answer.
  const whole = await call("POST", "/v1/lazy/mount", { index: "/snapflow/images/r1.index.json", urls, work: "/snapflow/lazy/r4", cache: "/snapflow/chunks", format: FORMAT });
  expect(whole.status, JSON.stringify(whole.body)).toBe(200);
  expect(whole.body.mounted.map((m: MountEntry) => m.kind)).toEqual(["lazy"]);
  expect(whole.body.how).toBeUndefined();
  const swap = { target: "/workspace/app4", id: "r4" };
  expect((await call("POST", "/v1/swap/plan", swap)).status).toBe(200);
  const mount = { kind: "lazy-image", work: "/snapflow/lazy/r4", format: FORMAT };
  const at = await call("POST", "/v1/swap/in", { ...swap, mount });
  expect(at.status, JSON.stringify(at.body)).toBe(200);
  expect(at.body).toMatchObject({ swapped: true, hadTarget: false, mounted: { kind: "image", path: "/workspace/app4", source: "/snapflow/lazy/r4/fuse/image" } });
  const again = await call("POST", "/v1/swap/in", { ...swap, mount });
  expect(again.body.mounted).toEqual(at.body.mounted);
  expect((await readMountinfo()).filter((m) => m.mountPoint === realpathSync(host("/workspace/app4")))).toHaveLength(1);
  // The same image mounted elsewhere from the same helper (POST /v1/lazy/remount, the swap's own step).
  const beside = await call("POST", "/v1/lazy/remount", { work: "/snapflow/lazy/r4", path: "/workspace/app5", format: FORMAT });
  expect(beside.status, JSON.stringify(beside.body)).toBe(200);
  expect(readdirSync(host("/workspace/app5")).sort()).toEqual(readdirSync(host("/workspace/src")).sort());
  expect((await call("DELETE", `/v1/mounts?path=${encodeURIComponent("/workspace/app5")}`)).body.unmounted).toEqual(["/workspace/app5"]);
  expect(readdirSync(host("/workspace/app4")).sort()).toEqual(readdirSync(host("/workspace/src")).sort());
  const done = (await call("POST", "/v1/lazy/wait", { work: "/snapflow/lazy/r4", timeoutMs: 30_000 })).body as LazyStatus;
  expect(done.state).toBe("complete");
  expect(done.chunks.local).toBe(done.chunks.total);
  expect(helpers(host("/snapflow/lazy/r4"))).toHaveLength(1);
  execFileSync("umount", [host("/workspace/app4")]);
  execFileSync("fusermount3", ["-u", host("/snapflow/lazy/r4/fuse")]);
  for (let i = 0; i < 50 && helpers(host("/snapflow/lazy/r4")).length; i++) await new Promise((r) => setTimeout(r, 100));
  expect(helpers(host("/snapflow/lazy/r4"))).toEqual([]);
  expect((await call("GET", "/v1/mounts")).body.mounts).toEqual([]);

  // The helper gone (as after an agent restart), the swap asked again keeps what it did and names what is missing.
  const gone = await call("POST", "/v1/swap/in", { ...swap, mount });
  expect(gone.status).toBe(404);
  expect(gone.body.error).toMatchObject({ code: "not_found", field: "mount.work" });
  expect(gone.body.error.message).toMatch(/^mount\.work: no lazy mount's helper serves at \/snapflow\/lazy\/r4/);
  expect((await call("GET", `/v1/swap?target=${encodeURIComponent(swap.target)}&id=r4`)).body.state).toBe("swapped");
  expect((await readMountinfo()).filter((m) => m.mountPoint.startsWith(base))).toEqual([]);
});

/** snapflow-lazy processes serving a mount under `work` (by their command line). */
function helpers(work: string): string[] {
  try {
    return execFileSync("pgrep", ["-f", `snapflow-lazy mount .*${work}/`], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

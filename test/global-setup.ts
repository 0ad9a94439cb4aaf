// Starts the real parts the Worker tests talk to: a local S3 server (SeaweedFS) behind our fault proxy, and the
// snapflow agent as a host process with test-only fault injection on. Their addresses and the tokens reach the Workers pool through
// vitest's provide/inject, and from there the Worker's bindings (vitest.config.ts).
import { randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startObjectStore } from "../scripts/stack/object-store-server.ts";
import { agentCommand, agentRuntimeFrom, type AgentRuntime } from "../scripts/stack/agent-runtime.ts";
import { PROJECT, startAgent, STATE } from "../scripts/stack/stack.ts";
import { b64, compress, deltaThroughBaseSymlink, hostileDeletions, imageCases, imageToolMissing, OWNED_TREE, tarCases, tarOf, type CorpusOptions, type ImageKind } from "./fixtures/hostile-corpus.ts";
import { startFaultProxy } from "./fault-proxy.ts";

export interface TestStack {
  /** what runs the agent: Node on the source (default), or Bun on the bundle (SNAPFLOW_AGENT_RUNTIME=bun) */
  agentRuntime: AgentRuntime;
  /**
   * A sandbox whose whole root is a small tmpfs (root only): its disk fills during staging and extraction. The
   * reason when it could not be made (the tests that need it say so and skip).
   */
  smallDisk: { sandboxId: string; bytes: number } | { skipped: string };
  /** where the Worker reaches the agent: the fault proxy in front of it (faults armed at agentFaultProxyUrl) */
  agentUrl: string;
  agentSecret: string;
  /** the fault proxy in front of the store (test/fault-proxy.ts): POST /__faults arms a fault, GET lists what fired */
  faultProxyUrl: string;
  /** the fault proxy between the Worker and the agent (the same URL as agentUrl; its /__faults arm Worker ⇄ agent faults) */
  agentFaultProxyUrl: string;
  apiToken: string;
  s3: { endpoint: string; bucket: string; accessKeyId: string; secretAccessKey: string };
}

/**
 * The hostile corpus (fixtures/hostile-corpus.ts) for test/workers/hostile-restore-integration.test.ts, built here
 * because the Workers pool cannot run tar, mksquashfs or mkfs.erofs. Attacks aim at /workspace/outside, the
 * restore target /workspace/app's sibling. Bytes are base64.
 */
export interface HostileCorpus {
  /** single archives, zstd-compressed (the restore strategies' format) */
  tar: { name: string; zst: string }[];
  /** plain tar of the base tree (extracted into the source sandbox), and the zstd layer that replaces a delta's archive */
  delta: { base: string; layer: string };
  deletions: { base: string; throughSymlinks: string[]; outOfTree: string[][] };
  images: { kind: ImageKind; name: string; bytes: string }[];
  /** why a kind of image could not be built here */
  imagesMissing: Partial<Record<ImageKind, string>>;
  /** not an attack: a plain tar whose owners and setuid/setgid bits a restore keeps only when asked (keepOwnership) */
  owners: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    stack: TestStack;
    hostile: HostileCorpus;
  }
}

function hostileCorpus(): HostileCorpus {
  const o: CorpusOptions = { outsideRel: "../outside", outsideAbs: ["/workspace/outside"] };
  const delta = deltaThroughBaseSymlink(o);
  const deletions = hostileDeletions(o);
  const imagesMissing: HostileCorpus["imagesMissing"] = {};
  const images: HostileCorpus["images"] = [];
  for (const kind of ["squashfs", "erofs"] as const) {
    const missing = imageToolMissing(kind);
    if (missing) imagesMissing[kind] = missing;
    else for (const c of imageCases(kind, o)) images.push({ kind, name: c.name, bytes: b64(c.bytes) });
  }
  return {
    tar: tarCases(o).map((c) => ({ name: c.name, zst: b64(compress(tarOf(c.entries), "zstd")) })),
    delta: { base: b64(tarOf(delta.base)), layer: b64(compress(tarOf(delta.layer), "zstd")) },
    deletions: { base: b64(tarOf(deletions.base)), throughSymlinks: deletions.throughSymlinks, outOfTree: deletions.outOfTree },
    images,
    imagesMissing,
    owners: b64(tarOf(OWNED_TREE)),
  };
}

export default async function setup(project: TestProject) {
  // One stack per project that asks for it (workers, workers-kv-limit): each its own directory and ports.
  const dir = join(STATE, `test-${process.pid}-${project.name}`);
  mkdirSync(dir, { recursive: true });
  // SNAPFLOW_AGENT_RUNTIME=bun (npm run test:bun): the agent bundled and run as production does (agent-runtime.ts),
  // bundled once here, so that a restart by the fault proxy runs the same file; first, so that a missing Bun or a
  // failed bundle stops the run before it starts a store or mounts a tmpfs that nothing would clean up.
  const runtime = agentRuntimeFrom(process.env.SNAPFLOW_AGENT_RUNTIME);
  const command = agentCommand(runtime, PROJECT, dir);
  if (runtime !== "node") console.log(`snapflow tests (${project.name}): the agent runs under ${command.describe}`);
  const store = await startObjectStore({ dir: join(dir, "s3"), bucket: "snapflow-test", log: () => {} });
  const agentSecret = randomBytes(32).toString("hex");
  const smallDisk = mountSmallDisk(join(dir, "sandboxes"));
  // Until the teardown is returned, a failure (an agent that does not start, say) takes down what is up: vitest runs
  // no teardown for a setup that threw, and a mounted tmpfs and a store would outlive the run.
  // Undone last first: the directory goes once nothing writes into it.
  const undo: (() => unknown)[] = [
    () => rmSync(dir, { recursive: true, force: true }),
    () => store.stop(),
    () => "sandboxId" in smallDisk && spawnSync("umount", ["-l", join(dir, "sandboxes", smallDisk.sandboxId)]),
  ];
  try {
    // A store silent for 6 s is a stalled one here (60 s in production), so the stall tests run in seconds.
    const agentOptions = { secret: agentSecret, sandboxesDir: join(dir, "sandboxes"), logFile: join(dir, "agent.log"), faults: true, storeIdleSeconds: 6, argv: command.argv };
    let agent: Awaited<ReturnType<typeof startAgent>>;
    // Everything reaches the store through the fault proxy (test/fault-proxy.ts): the Worker's store, the URLs it
    // presigns and so the agent. The proxy also kills and restarts the agent for tests, on the same port.
    const proxy = await startFaultProxy(store.endpoint, {
      "POST /__agent/kill": async (_req, res) => {
        // The whole process group, as a sandbox that dies takes its tar and zstd with it.
        const pid = agent.process.child.pid!;
        process.kill(-pid, "SIGKILL");
        await agent.process.exited;
        agent = await startAgent({ ...agentOptions, storeEndpoint: proxy.url, port: Number(new URL(agent.url).port) });
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ killed: pid, restarted: agent.process.child.pid }));
      },
      // What the kernel has mounted under the sandboxes, whatever the agent's registry (in memory: a killed agent's
      // successor does not know its mounts) says: a test in workerd cannot read /proc.
      "GET /__mounts": async (_req, res) => {
        const sandboxes = join(dir, "sandboxes");
        const points = readFileSync("/proc/self/mountinfo", "utf8").split("\n").map((l) => l.split(" ")[4] ?? "").filter((m) => m.startsWith(`${sandboxes}/`));
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ mounts: points.map((m) => m.slice(sandboxes.length + 1)) }));
      },
      // The fidelity test's independent walk and the properties it adds to a tree (test/fixtures/fidelity-tree.py):
      // Python's os.lstat and os.listxattr on the sandbox's host directory, nothing of snapflow's.
      "POST /__fidelity": async (req, res) => {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        const { op, sandboxId, path } = JSON.parse(Buffer.concat(chunks).toString()) as { op: "make" | "walk" | "bad" | "shorten"; sandboxId: string; path: string };
        if (!/^[a-z0-9-]{1,63}$/.test(sandboxId) || path.split("/").includes("..")) return void res.writeHead(400).end("bad sandbox or path");
        const r = spawnSync("python3", [join(PROJECT, "test/fixtures/fidelity-tree.py"), op, join(dir, "sandboxes", sandboxId, path)], { encoding: "utf8", maxBuffer: 64 << 20 });
        if (r.status !== 0) return void res.writeHead(500).end(`fidelity-tree.py ${op}: ${r.stderr}`);
        res.writeHead(200, { "content-type": "application/json" }).end(r.stdout || "{}");
      },
    });
    undo.push(() => proxy.stop());
    agent = await startAgent({ ...agentOptions, storeEndpoint: proxy.url });
    undo.push(() => agent.process.stop());
    // And every request from the Worker (and the tests' helpers) to the agent passes a second instance, so a test can
    // cut or stall the Worker ⇄ agent connection too. The agent keeps its port across a kill, so this one address holds.
    const agentProxy = await startFaultProxy(agent.url);
    undo.push(() => agentProxy.stop());
    project.provide("stack", {
      agentRuntime: runtime,
      smallDisk,
      agentUrl: agentProxy.url,
      agentFaultProxyUrl: agentProxy.url,
      agentSecret,
      apiToken: randomBytes(32).toString("hex"),
      faultProxyUrl: proxy.url,
      s3: { endpoint: proxy.url, bucket: store.bucket, accessKeyId: store.accessKeyId, secretAccessKey: store.secretAccessKey },
    });
    project.provide("hostile", hostileCorpus());
    return async () => {
      await agent.process.stop();
      await agentProxy.stop();
      await proxy.stop();
      if ("sandboxId" in smallDisk) spawnSync("umount", ["-l", join(dir, "sandboxes", smallDisk.sandboxId)]);
      await store.stop();
      rmSync(dir, { recursive: true, force: true });
    };
  } catch (e) {
    for (const step of undo.reverse()) await Promise.resolve().then(step).catch(() => {});
    throw e;
  }
}

/** A 24 MiB tmpfs as one sandbox's root directory (the agent maps every path of that sandbox below it). */
function mountSmallDisk(sandboxesDir: string): TestStack["smallDisk"] {
  const sandboxId = `small-disk-${process.pid}`;
  const bytes = 24 * 2 ** 20;
  if (process.getuid?.() !== 0) return { skipped: "mounting a tmpfs needs root" };
  const root = join(sandboxesDir, sandboxId);
  mkdirSync(root, { recursive: true });
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${bytes},mode=0755`, "tmpfs", root], { encoding: "utf8" });
  return r.status === 0 ? { sandboxId, bytes } : { skipped: `mount -t tmpfs failed: ${(r.stderr || r.error?.message || "").trim()}` };
}

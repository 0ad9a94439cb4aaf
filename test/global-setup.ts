// Starts the real parts the Worker tests talk to: a local S3 server (SeaweedFS) and the snapflow agent as a host
// process with test-only fault injection on. Their addresses and the tokens reach the Workers pool through
// vitest's provide/inject, and from there the Worker's bindings (vitest.config.ts).
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startObjectStore } from "../scripts/lib/object-store-server.ts";
import { startAgent, STATE } from "../scripts/lib/stack.ts";
import { b64, compress, deltaThroughBaseSymlink, hostileDeletions, imageCases, imageToolMissing, tarCases, tarOf, type CorpusOptions, type ImageKind } from "./fixtures/hostile-corpus.ts";

export interface TestStack {
  agentUrl: string;
  agentSecret: string;
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
  };
}

export default async function setup(project: TestProject) {
  const dir = join(STATE, `test-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const store = await startObjectStore({ dir: join(dir, "s3"), bucket: "snapflow-test", log: () => {} });
  const agentSecret = randomBytes(32).toString("hex");
  const agent = await startAgent({ secret: agentSecret, storeEndpoint: store.endpoint, sandboxesDir: join(dir, "sandboxes"), logFile: join(dir, "agent.log"), faults: true });
  project.provide("stack", {
    agentUrl: agent.url,
    agentSecret,
    apiToken: randomBytes(32).toString("hex"),
    s3: { endpoint: store.endpoint, bucket: store.bucket, accessKeyId: store.accessKeyId, secretAccessKey: store.secretAccessKey },
  });
  project.provide("hostile", hostileCorpus());
  return async () => {
    await agent.process.stop();
    await store.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}

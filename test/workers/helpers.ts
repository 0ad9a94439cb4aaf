// Helpers for Worker tests: call the API through the Worker's own fetch handler, and talk to the real host agent
// directly (to prepare trees and read manifests independently of the code under test).
import { env, exports } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { afterAll, expect } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";

export async function api(method: string, path: string, body?: unknown, token: string = env.API_TOKEN): Promise<{ status: number; json: any }> {
  const r = await exports.default.fetch(`http://snapflow.test${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

/**
 * fetch, tried again for a moment when the connection itself fails: the fault suite SIGKILLs and restarts the
 * shared agent (store-faults-integration), and a test file running beside it must not fail for that second.
 */
async function fetchAcrossRestarts(url: string, init: RequestInit): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fetch(url, init);
    } catch (e) {
      if (attempt >= 20 || init.body instanceof ReadableStream) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

export async function agent(sandboxId: string, method: string, path: string, body?: unknown): Promise<any> {
  const r = await fetchAcrossRestarts(`${env.AGENT_URL}${path}`, {
    method,
    headers: { authorization: `Bearer ${await agentTokenFor(env.AGENT_SECRET, sandboxId)}`, "x-snapflow-sandbox": sandboxId, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`agent ${method} ${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

let counter = 0;
/** A sandbox id no other test uses: every test gets fresh sandbox roots. */
export function freshSandbox(label: string): string {
  return `${label}-${Date.now().toString(36)}-${(counter++).toString(36)}`;
}

/**
 * Starts a backup or restore through the API and waits for its Workflow to reach `expected` (retry delays off);
 * returns the API's status of the run. If the run ends otherwise, throws with the run's own error.
 */
export async function runWorkflow(kind: "backup" | "restore", body: Record<string, unknown>, expected: "complete" | "errored" = "complete"): Promise<any> {
  await using wf = await introspectWorkflow(kind === "backup" ? env.BACKUP_WORKFLOW : env.RESTORE_WORKFLOW);
  await wf.modifyAll(async (m) => m.disableRetryDelays());
  const started = await api("POST", `/api/${kind}s`, body);
  if (started.status !== 202) throw new Error(`POST /api/${kind}s answered ${started.status}: ${JSON.stringify(started.json)}`);
  const [instance] = await wf.get();
  const ended = await instance!.waitForStatus(expected).then(() => null, (e: Error) => e);
  const status = (await api("GET", `/api/${kind}s/${started.json.id}`)).json;
  if (ended) throw new Error(`${kind} ${body.strategy ?? ""}: ${status.error ?? ended.message}`);
  return status;
}

/** Writes a small text file in a sandbox through the agent (to change a tree between snapshots). */
export async function putFile(sandbox: string, path: string, text: string): Promise<void> {
  const r = await fetchAcrossRestarts(`${env.AGENT_URL}/v1/files?path=${encodeURIComponent(path)}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${await agentTokenFor(env.AGENT_SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox },
    body: text,
  });
  if (r.status !== 200) throw new Error(`writing ${path}: ${r.status} ${await r.text()}`);
}

/** SHA-256 of bytes, hex. */
export async function sha256Hex(data: Uint8Array): Promise<string> {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", data))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Index of the first differing byte, or -1 when equal (toEqual on megabytes is slow and prints megabytes). */
export function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.byteLength, b.byteLength);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.byteLength === b.byteLength ? -1 : n;
}

/** The real local S3 server the Worker's store points at, through our own S3 store (to damage or inspect objects). */
export async function testStore() {
  const { s3Store } = await import("../../src/store/s3-store.ts");
  return s3Store(s3Settings());
}

const s3Settings = () => ({ endpoint: env.S3_ENDPOINT, bucket: env.S3_BUCKET, region: "auto", accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY });

/** The store's open multipart uploads under `prefix` (S3 ListMultipartUploads): what a failed run must not leave. */
export async function openUploads(prefix: string): Promise<{ key: string; uploadId: string }[]> {
  const { s3Client } = await import("../../src/store/s3-store.ts");
  const u = new URL(`${env.S3_ENDPOINT.replace(/\/+$/, "")}/${env.S3_BUCKET}`);
  u.searchParams.set("uploads", "");
  u.searchParams.set("prefix", prefix);
  const r = await s3Client(s3Settings()).fetch(u);
  const text = await r.text();
  if (!r.ok) throw new Error(`list multipart uploads: ${r.status} ${text}`);
  return [...text.matchAll(/<Upload>.*?<Key>(.*?)<\/Key>.*?<UploadId>(.*?)<\/UploadId>.*?<\/Upload>/gs)].map((m) => ({ key: m[1]!, uploadId: m[2]! }));
}

/** Names in a sandbox directory (its manifest's top level); [] when the directory does not exist. */
export async function namesIn(sandbox: string, dir: string): Promise<string[]> {
  const m = await agent(sandbox, "POST", "/v1/manifest", { path: dir }).catch((e: Error) => {
    if (/ 404 /.test(e.message)) return { entries: [] };
    throw e;
  });
  return m.entries.map((e: { path: string }) => e.path).filter((p: string) => !p.includes("/"));
}

/**
 * What a finished run may not leave in a sandbox: a new or old tree beside `target`, a swap journal, a staging
 * file, a downloaded image or a mount. Empty when clean.
 */
export async function sandboxLeftovers(sandbox: string, target: string): Promise<string[]> {
  const parent = target.slice(0, target.lastIndexOf("/")) || "/";
  const beside = (await namesIn(sandbox, parent)).filter((n) => n.startsWith(".snapflow-")).map((n) => `${parent}/${n}`);
  const ours = [];
  for (const dir of ["/snapflow/staging", "/snapflow/swaps", "/snapflow/images"]) ours.push(...(await namesIn(sandbox, dir)).map((n) => `${dir}/${n}`));
  const mounts = (await agent(sandbox, "GET", "/v1/mounts")).mounts.map((m: { path: string }) => `mount ${m.path}`);
  return [...beside, ...ours, ...mounts];
}

/** Arms a fault in the proxy in front of the store (test/fault-proxy.ts): aim `match` at this test's own keys. */
export async function armStoreFault(fault: { match: string | string[]; method?: string; action: "status" | "cut" | "stall"; status?: number; afterBytes?: number; ms?: number; times?: number }): Promise<void> {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__faults`, { method: "POST", body: JSON.stringify(fault) });
  if (!r.ok) throw new Error(`arming a store fault: ${r.status} ${await r.text()}`);
}

/** The store faults that fired on requests whose path holds `match`. */
export async function firedStoreFaults(match: string): Promise<{ fault: { action: string }; method: string; path: string }[]> {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__faults`);
  return ((await r.json()) as { fired: { fault: { action: string }; method: string; path: string }[] }).fired.filter((f) => f.path.includes(match));
}

/** SIGKILLs the agent's whole process group (tar and zstd with it) and starts it again on the same port. */
export async function killAgent(): Promise<void> {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__agent/kill`, { method: "POST" });
  if (!r.ok) throw new Error(`killing the agent: ${r.status} ${await r.text()}`);
}

/** Mount points the kernel has under one sandbox's root (`<sandbox>/…` relative to the sandboxes directory), whatever the agent remembers. */
export async function kernelMounts(sandbox: string): Promise<string[]> {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__mounts`);
  return ((await r.json()) as { mounts: string[] }).mounts.filter((m) => m === sandbox || m.startsWith(`${sandbox}/`));
}

/** Requests the store saw (through the fault proxy) whose path holds `match`, by method and `?uploads` / `?partNumber=n`. */
export async function storeRequests(match: string): Promise<string[]> {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__requests`);
  return ((await r.json()) as { seen: { method: string; path: string }[] }).seen.filter((x) => x.path.includes(match)).map((x) => `${x.method} ${x.path}`);
}

/** Everything a run may not leave: in the sandbox (sandboxLeftovers) and, for a snapshot, in the store. */
export async function leftovers(sandbox: string, target: string, snapshotId?: string): Promise<string[]> {
  const out = await sandboxLeftovers(sandbox, target);
  if (snapshotId) {
    out.push(...(await openUploads(`snapshots/${snapshotId}/`)).map((u) => `open upload ${u.key}`));
    out.push(...(await (await testStore()).list(`uploads/${snapshotId}/`)).objects.map((o) => `upload record ${o.key}`));
  }
  return out;
}

/**
 * One row of the fault table in docs/faults.md (fault × phase → outcome, retries, time, leftovers), printed so that
 * `npm run test:faults` can gather them: the lines marked FAULT-ROW.
 */
export function faultRow(row: { fault: string; phase: string; outcome: string; retries: number | string; ms: number; leftovers: string[] }): void {
  // The table's "leftovers: 0" is asserted, not just printed.
  expect(row.leftovers, `left behind after: ${row.fault}`).toEqual([]);
  console.log(`FAULT-ROW | ${row.fault} | ${row.phase} | ${row.outcome} | ${row.retries} | ${(row.ms / 1000).toFixed(1)} s | ${row.leftovers.length} |`);
}

/** A fault between the Worker and the agent (test/fault-proxy.ts in front of the agent): aim it at a sandbox and a route. */
export async function armAgentFault(sandboxId: string, fault: { match: string | string[]; method?: string; action: "status" | "cut" | "stall" | "refuse" | "lie"; set?: Record<string, unknown>; body?: "request" | "response"; status?: number; afterBytes?: number; ms?: number; times?: number }): Promise<void> {
  const r = await fetch(`${(env as unknown as { TEST_AGENT_FAULT_PROXY: string }).TEST_AGENT_FAULT_PROXY}/__faults`, { method: "POST", body: JSON.stringify({ ...fault, headers: { "x-snapflow-sandbox": sandboxId } }) });
  if (!r.ok) throw new Error(`arming an agent fault: ${r.status} ${await r.text()}`);
}

/** The agent faults that fired for `sandboxId`'s requests whose path holds `match`. */
type FiredAgentFault = { fault: { action: string; headers?: Record<string, string> }; method: string; path: string; ended?: string };
export async function firedAgentFaults(sandboxId: string, match: string): Promise<FiredAgentFault[]> {
  const r = await fetch(`${(env as unknown as { TEST_AGENT_FAULT_PROXY: string }).TEST_AGENT_FAULT_PROXY}/__faults`);
  return ((await r.json()) as { fired: FiredAgentFault[] }).fired
    .filter((f) => f.path.includes(match) && f.fault.headers?.["x-snapflow-sandbox"] === sandboxId);
}

/** Requests the agent saw from anyone (through its fault proxy) for `sandboxId`, as "METHOD /path", whose path holds `match`. */
export async function agentRequests(sandboxId: string, match: string): Promise<string[]> {
  const r = await fetch(`${(env as unknown as { TEST_AGENT_FAULT_PROXY: string }).TEST_AGENT_FAULT_PROXY}/__requests`);
  return ((await r.json()) as { seen: { method: string; path: string; sandbox?: string }[] }).seen.filter((x) => x.sandbox === sandboxId && x.path.includes(match)).map((x) => `${x.method} ${x.path}`);
}

/**
 * Fresh sandboxes for one test file, each deleted with everything in it (mounts included) after the file's tests:
 * `const sandbox = sandboxesDeletedAfterAll();` then `sandbox("label")`.
 */
export function sandboxesDeletedAfterAll(): (label: string) => string {
  const used: string[] = [];
  afterAll(async () => {
    for (const id of used) await agent(id, "DELETE", "/v1/sandbox").catch(() => {});
  });
  return (label) => {
    const id = freshSandbox(label);
    used.push(id);
    return id;
  };
}

// What the CLI prints for a person about a run (scripts/cli/run-lines.ts), fed the API's real answers: runs through
// the Workflows in workerd, the real host agent and S3 server. The lines must not mislead: no rate for a step that
// moved nothing, a chunked backup's upload counted in chunks, a restore into a fresh sandbox not called a
// replacement, a failure named by its step without the Workflow's error class.
import { expect, it } from "vitest";
import { backupResultLine, failureLine, restoreResultLine, stepLine } from "../../scripts/cli/run-lines.ts";
import { agent, api, freshSandbox, runWorkflow, testStore } from "./helpers.ts";

const linesOf = (kind: "backup" | "restore", s: { steps: Record<string, any> }) => Object.entries(s.steps).map(([n, step]) => stepLine(kind, n, step));

it("a backup's step lines and result line; the restore command it prints brings the tree back into a fresh sandbox, not 'replaced'", async () => {
  const src = freshSandbox("lines-src");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace", kind: "node-modules", seed: 71, files: 400, bytes: 20_000_000 });
  const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace" });
  const snap = (await api("GET", `/api/snapshots/${b.id}`)).json;
  const lines = linesOf("backup", b);
  expect(lines.find((l) => l.trimStart().startsWith("transfer"))).toMatch(/sent \d+\.\d MB, \d+\.\d MB\/s$/);
  // verify compared a stored size in a few ms: what it checked, no speed.
  expect(lines.find((l) => l.trimStart().startsWith("verify"))).toMatch(/checked: /);
  expect(lines.find((l) => l.trimStart().startsWith("verify"))).not.toMatch(/MB\/s/);
  const result = backupResultLine(b, snap, { path: "/workspace" });
  expect(result).toMatch(new RegExp(`^snapshot ${b.id}: 400 files, 20\\.0 MB → \\d+\\.\\d MB in \\d.*\\. Restore it: npx snapflow restore --snapshot ${b.id} --sandbox SANDBOX --path /workspace$`));

  // As the README's first hour goes: into a sandbox never used, at the default path. Its /workspace exists (the agent
  // makes a sandbox's roots) but holds nothing: nothing is replaced.
  const dst = freshSandbox("lines-dst");
  const r = await runWorkflow("restore", { snapshotId: b.id, sandboxId: dst, path: "/workspace" });
  expect(r.steps.verify.replaced).toBe(false);
  const line = restoreResultLine(r, { sandbox: dst, path: "/workspace" });
  expect(line).toMatch(new RegExp(`^restored ${b.id} into ${dst}:/workspace: 400 files, 20\\.0 MB, verified, in \\d`));
  expect(line).not.toMatch(/replaced/);

  // Over a tree that holds files, with replace: replaced, and said so.
  const again = await runWorkflow("restore", { snapshotId: b.id, sandboxId: dst, path: "/workspace", replace: true });
  expect(again.steps.verify.replaced).toBe(true);
  expect(restoreResultLine(again, { sandbox: dst, path: "/workspace" })).toMatch(/; what was there is replaced$/);
});

it("a chunked backup's transfer line counts the chunks it uploaded; its lazy restore says usable and complete", async () => {
  const src = freshSandbox("lines-chunked");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 72, files: 300, bytes: 12_000_000 });
  const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-chunked" });
  const chunks = b.steps.transfer.chunks;
  const transfer = stepLine("backup", "transfer", b.steps.transfer);
  if (chunks.uploadedBytes > 0) expect(transfer).toContain(`uploaded ${(chunks.uploadedBytes / 1e6).toFixed(1)} MB in ${chunks.uploadedChunks} new chunks of ${chunks.count}`);
  else expect(transfer).toContain(`uploaded nothing: all ${chunks.count} chunks`);
  // Not the index's few kB as if they were the snapshot.
  expect(transfer).not.toMatch(/sent|0\.0 MB/);
  const snap = (await api("GET", `/api/snapshots/${b.id}`)).json;
  expect(backupResultLine(b, snap, { path: "/workspace/app" })).toMatch(new RegExp(`^snapshot ${b.id}: 300 files, 12\\.0 MB → \\d+\\.\\d MB image`));

  const dst = freshSandbox("lines-lazy");
  const r = await runWorkflow("restore", { snapshotId: b.id, sandboxId: dst, path: "/workspace/app" });
  expect(r.strategy).toBe("lazy-squashfs");
  const lines = linesOf("restore", r);
  // The index (kB, no speed), then the tree mounted at the target in the same step: no materialize step follows.
  expect(lines.find((l) => l.trimStart().startsWith("transfer"))).not.toMatch(/MB\/s/);
  expect(lines.find((l) => l.trimStart().startsWith("transfer"))).toMatch(/mounted lazily: usable \d+ ms after the request/);
  expect(lines.find((l) => l.trimStart().startsWith("materialize"))).toBeUndefined();
  expect(restoreResultLine(r, { sandbox: dst, path: "/workspace/app" })).toMatch(/, verified, usable after \d.* \(lazy\), complete after \d/);
  await api("DELETE", `/api/sandboxes/${dst}`); // its lazy mount
});

it("a failed restore is one line naming the step, the sandbox and the path, without the Workflow's error class", async () => {
  const src = freshSandbox("lines-fsrc");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 73, files: 100, bytes: 2_000_000 });
  const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app" });
  const snap = (await api("GET", `/api/snapshots/${b.id}`)).json;
  // The stored archive damaged: same size, other bytes; every attempt's SHA-256 check fails.
  await (await testStore()).put(snap.archive.key, new Uint8Array(snap.archive.bytes).fill(7));
  const dst = freshSandbox("lines-fdst");
  const failed = await runWorkflow("restore", { snapshotId: b.id, sandboxId: dst, path: "/workspace/app" }, "errored");
  const line = failureLine("restore", failed, { sandbox: dst, path: "/workspace/app" });
  expect(line).toMatch(new RegExp(`^snapflow restore: restore ${failed.id} of ${dst}:/workspace/app failed at transfer: \\S`));
  expect(line).not.toMatch(/failed at transfer: [A-Za-z]*Error:/);
  expect(line.split("\n")).toHaveLength(1);
});

// The restore's "unless asked" (issue 12): owners and setuid/setgid bits come back only with keepOwnership. A
// source sandbox holds a setuid and a setgid program and a directory and file of uid 4242 (planted by the agent's
// own extraction with the switch on); the real BackupWorkflow snapshots it as tar, squashfs and erofs, and the real
// RestoreWorkflow restores each into fresh sandboxes with and without the switch. What the restored tree holds is
// read back from the agent (POST /v1/manifest: lstat's mode, uid and gid).
import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { agent, api, freshSandbox, runWorkflow } from "./helpers.ts";

const PATH = "/workspace/app";
const owners = Uint8Array.from(atob(inject("hostile").owners), (c) => c.charCodeAt(0));
const imagesMissing = inject("hostile").imagesMissing;

type Entry = { path: string; mode: number; uid: number; gid: number };
async function tree(sandbox: string): Promise<Record<string, Entry>> {
  const m = await agent(sandbox, "POST", "/v1/manifest", { path: PATH });
  return Object.fromEntries(m.entries.map((e: Entry) => [e.path, e]));
}

let source: string | undefined;
/** The source sandbox, planted once through PUT /v1/extract?keepOwnership=true. */
async function plantedSource(): Promise<string> {
  if (source) return source;
  const sandbox = freshSandbox("owners-src");
  const r = await fetch(`${env.AGENT_URL}/v1/extract?path=${encodeURIComponent(PATH)}&kind=tar&compression=none&keepOwnership=true`, {
    method: "PUT",
    headers: { authorization: `Bearer ${await agentTokenFor(env.AGENT_SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox },
    body: owners,
  });
  expect(r.status, await r.clone().text()).toBe(200);
  const t = await tree(sandbox);
  expect(t["bin/suid"]!.mode).toBe(0o4755);
  expect(t["theirs/file"]).toMatchObject({ uid: 4242, gid: 4343 });
  return (source = sandbox);
}

const PAIRS = [
  { backup: "tar-zst-pipe", restore: "presigned-tar-zst-pipe", needs: undefined },
  { backup: "tar-zst-pipe", restore: "presigned-tar-zst", needs: undefined },
  { backup: "squashfs-zstd", restore: "presigned-squashfs-extract", needs: "squashfs" as const },
  // fsck.erofs 1.5 sets an entry's mode before its owner, and the kernel clears setuid/setgid on chown: the agent
  // sets the bits again from the image's inodes (images.ts restoreErofsSetid).
  { backup: "erofs-lz4", restore: "presigned-erofs-extract", needs: "erofs" as const },
];

describe("keepOwnership: owners and setuid/setgid bits only when asked", () => {
  for (const { backup, restore, needs } of PAIRS) {
    it.skipIf(needs && imagesMissing[needs])(`${backup} → ${restore}: without the switch, the agent's user and no set-id bits; with it, as archived and verified`, async () => {
      const src = await plantedSource();
      const { snapshotId } = await runWorkflow("backup", { sandboxId: src, path: PATH, strategy: backup });

      const plain = freshSandbox("owners-off");
      await runWorkflow("restore", { snapshotId, sandboxId: plain, path: PATH, strategy: restore });
      const off = await tree(plain);
      const self = { uid: off["plain"]!.uid, gid: off["plain"]!.gid };
      expect(self.uid).not.toBe(4242);
      expect(off["bin/suid"]!.mode).toBe(0o755);
      expect(off["bin/sgid"]!.mode).toBe(0o755);
      expect(off["theirs"]).toMatchObject(self);
      expect(off["theirs/file"]).toMatchObject(self);

      const kept = freshSandbox("owners-on");
      const run = await runWorkflow("restore", { snapshotId, sandboxId: kept, path: PATH, strategy: restore, keepOwnership: true });
      const on = await tree(kept);
      expect(on["bin/suid"]!.mode).toBe(0o4755);
      expect(on["bin/sgid"]).toMatchObject({ mode: 0o2755, gid: 4343 });
      expect(on["theirs"]).toMatchObject({ mode: 0o750, uid: 4242, gid: 4343 });
      expect(on["theirs/file"]).toMatchObject({ mode: 0o640, uid: 4242, gid: 4343 });
      // Verified, not only restored: the walk compared the whole mode and the owners the manifest records.
      expect(JSON.stringify(run.steps)).not.toMatch(/setidCleared/);
      expect(run.steps.verify.verified.owners).toBe("compared");
      // The default restore is the native engine's (engine-unpack.ts): its walk compared them.
      if (restore === "presigned-tar-zst-pipe") expect(run.steps.verify.verified.engine).toBe("native");
    });
  }

  it("a restore with keepOwnership that is not a boolean is a 400 naming the field", async () => {
    const r = await api("POST", "/api/restores", { snapshotId: "rs-20260101000000-0123abcd", sandboxId: "owners-bad", keepOwnership: "yes" });
    expect(r.status).toBe(400);
    expect(r.json.error.field).toBe("keepOwnership");
  });
});

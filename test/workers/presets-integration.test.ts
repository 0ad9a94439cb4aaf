// Every (full) backup preset in the registry, then every restore preset that reads its format, on the tricky tree
// with what the fidelity table follows added to it (owners, set-id bits, xattrs, an ACL, a capability, a FIFO, a
// socket, nanosecond mtimes, a 255-byte name: test/fixtures/fidelity-tree.py). Each restore keeps ownership. For
// each pair:
//   - the Workflow's verify step and a manifest comparison must find the trees equal (what the manifest records);
//   - an independent walk (Python's os.lstat/os.listxattr/hashlib through the stack's proxy, nothing of snapflow's)
//     of source and restored tree decides, per property, kept or lost; and a tree with a non-UTF-8 name must be
//     refused by every backup. Each outcome must be exactly the one the registry declares for the pair
//     (src/strategies/fidelity.ts), which GET /api/strategies shows and docs/strategies-and-fidelity.md tabulates.
// The table it measured is printed at the end: backup × restore × property → kept / lost / refused.
import { env } from "cloudflare:workers";
import { afterAll, describe, expect, it } from "vitest";
import { FIDELITY_PROPERTIES, outcomes, pairFidelity, type FidelityProperty, type Outcome } from "../../src/strategies/fidelity.ts";
import { restoresFor, STRATEGIES, type BackupStrategy } from "../../src/strategies/registry.ts";
import { agent, api, freshSandbox, runWorkflow as run } from "./helpers.ts";

// Deltas need a base snapshot: test/workers/delta-integration.test.ts covers them.
const backups = STRATEGIES.filter((s): s is BackupStrategy => s.kind === "backup" && !s.delta);
const PATH = "/workspace/app";

/** What this machine's sandboxes can run, as the API reports it (the same check the Workflows' probe step makes). */
async function availability(): Promise<Map<string, string | undefined>> {
  const r = await api("GET", "/api/strategies?sandboxId=availability");
  return new Map(r.json.strategies.map((s: any) => [s.name, s.available ? undefined : s.reason]));
}

interface Walked {
  type: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  allocated: number;
  mtimeNs: string;
  ino: number;
  nlink: number;
  children: number | null;
  xattrs: Record<string, string>;
  sha256?: string;
  target?: string;
}
type Walk = Record<string, Walked>;

async function fidelity(op: "make" | "walk" | "bad" | "shorten", sandboxId: string): Promise<any> {
  const r = await fetch(`${(env as unknown as { TEST_FAULT_PROXY: string }).TEST_FAULT_PROXY}/__fidelity`, { method: "POST", body: JSON.stringify({ op, sandboxId, path: PATH }) });
  if (!r.ok) throw new Error(await r.text());
  return r.json();
}

const xattrsLike = (e: Walked, prefix: (n: string) => boolean) => JSON.stringify(Object.entries(e.xattrs).filter(([n]) => prefix(n)));

/** Per property, whether the restored tree has what the source had: "kept", or "lost: <first path that differs>". */
function judge(src: Walk, dst: Walk): Record<Exclude<FidelityProperty, "non-utf8-names">, string> {
  // A socket is its own row: no backup carries one, and its absence is not the other properties' loss.
  const entries = Object.entries(src).filter(([, e]) => e.type !== "socket");
  const first = (pred: (p: string, e: Walked, r: Walked | undefined) => boolean) => {
    const bad = entries.find(([p, e]) => pred(p, e, dst[p]));
    return bad ? `lost: ${bad[0]}` : "kept";
  };
  const groups = new Map<number, string[]>();
  for (const [p, e] of entries) if (e.type === "file" && e.nlink > 1) groups.set(e.ino, [...(groups.get(e.ino) ?? []), p]);
  const linked = [...groups.values()].filter((g) => g.length > 1);
  const unallocated = (e: Walked) => Math.max(0, e.size - e.allocated);
  return {
    "hard-links": linked.length === 0 ? "untested" : linked.every((g) => g.every((p) => dst[p] && dst[p]!.ino === dst[g[0]!]!.ino)) ? "kept" : `lost: ${linked[0]![0]}`,
    // Half the holes, as tree-verify.ts: filesystems and images allocate whole blocks.
    sparse: first((_p, e, r) => e.type === "file" && unallocated(e) > 64 * 1024 && (!r || unallocated(r) < unallocated(e) / 2)),
    owners: first((_p, e, r) => !r || r.uid !== e.uid || r.gid !== e.gid),
    setid: first((_p, e, r) => e.type === "file" && (!r || (r.mode & 0o6000) !== (e.mode & 0o6000))),
    xattrs: first((_p, e, r) => !r || xattrsLike(e, (n) => n.startsWith("user.")) !== xattrsLike(r, (n) => n.startsWith("user."))),
    acls: first((_p, e, r) => !r || xattrsLike(e, (n) => n.startsWith("system.posix_acl")) !== xattrsLike(r, (n) => n.startsWith("system.posix_acl"))),
    capabilities: first((_p, e, r) => !r || xattrsLike(e, (n) => n === "security.capability") !== xattrsLike(r, (n) => n === "security.capability")),
    "ns-mtime": first((_p, e, r) => (e.type === "file" || e.type === "dir") && (!r || r.mtimeNs !== e.mtimeNs)),
    "empty-dirs": first((_p, e, r) => e.type === "dir" && e.children === 0 && r?.type !== "dir"),
    fifos: first((_p, e, r) => e.type === "fifo" && r?.type !== "fifo"),
    sockets: Object.entries(src).some(([p, e]) => e.type === "socket" && dst[p]?.type !== "socket") ? "lost: special/socket" : "kept",
    "long-names": first((p, e, r) => p.split("/").some((n) => new TextEncoder().encode(n).length >= 200) && r?.sha256 !== e.sha256),
  };
}

/** Everything a restore must bring back whatever the table says: types, content, permission bits, link targets. */
function contentDifferences(src: Walk, dst: Walk): string[] {
  return Object.entries(src).filter(([, e]) => e.type !== "socket").filter(([p, e]) => {
    const r = dst[p];
    return !r || r.type !== e.type || r.sha256 !== e.sha256 || r.target !== e.target || (r.mode & 0o777) !== (e.mode & 0o777) || (e.type === "file" && r.size !== e.size);
  }).map(([p]) => p);
}

const table: { backup: string; restore: string; got: Record<string, string> }[] = [];

afterAll(() => {
  if (!table.length) return;
  const head = ["backup", "restore", ...FIDELITY_PROPERTIES];
  const lines = [`| ${head.join(" | ")} |`, `| ${head.map(() => "---").join(" | ")} |`];
  for (const row of table) lines.push(`| ${row.backup} | ${row.restore} | ${FIDELITY_PROPERTIES.map((p) => row.got[p]?.split(":")[0] ?? "").join(" | ")} |`);
  console.log(`fidelity, as measured (kept / lost / refused; untested: the stack could not make it):\n${lines.join("\n")}`);
});

describe.each(backups.map((b) => [b.name, b] as const))("%s", (_name, b) => {
  it(`round-trips the tricky tree through ${restoresFor(b.format).map((r) => r.name).join(" and ")}, keeping what the registry says`, async () => {
    const unavailable = await availability();
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: PATH, kind: "tricky", seed: 11 });
    const made: Record<string, true | string> = await fidelity("make", src);
    const source = await agent(src, "POST", "/v1/manifest", { path: PATH });
    const sourceWalk: Walk = await fidelity("walk", src);
    if (unavailable.get(b.name)) {
      // Not faked: the backup must fail in its probe step with the reason.
      await expect(run("backup", { sandboxId: src, path: PATH, strategy: b.name })).rejects.toThrow(unavailable.get(b.name)!);
      return;
    }
    // A format that cannot store a 255-byte name must refuse it naming the entry; the rest of its row is measured
    // on the same tree with that name one byte shorter.
    let longNames: string | undefined;
    const backup = await run("backup", { sandboxId: src, path: PATH, strategy: b.name }).catch(async (e: Error) => {
      if (!/255-byte name/.test(e.message)) throw e;
      longNames = "refused";
      await fidelity("shorten", src);
      return run("backup", { sandboxId: src, path: PATH, strategy: b.name });
    });
    expect(backup.status).toBe("complete");
    const sourceManifest = longNames ? await agent(src, "POST", "/v1/manifest", { path: PATH }) : source;
    const sourceTree: Walk = longNames ? await fidelity("walk", src) : sourceWalk;
    // A name that is not UTF-8 is refused, never left out of a backup called complete.
    const bad = freshSandbox("bad");
    await fidelity("bad", bad);
    // A backup that completes has left the file out (or mangled its name): lost, whatever it says.
    const refused = await run("backup", { sandboxId: bad, path: PATH, strategy: b.name }).then(() => "lost: the backup completed", (e: Error) => (/not UTF-8/.test(e.message) ? "refused" : `lost: ${e.message}`));
    const restores = restoresFor(b.format);
    expect(restores.length).toBeGreaterThan(0);
    for (const r of restores) {
      const dst = freshSandbox("dst");
      const body = { snapshotId: backup.snapshotId, sandboxId: dst, path: PATH, strategy: r.name, keepOwnership: true };
      if (unavailable.get(r.name)) {
        await expect(run("restore", body)).rejects.toThrow(unavailable.get(r.name)!);
        continue;
      }
      const declared = outcomes(pairFidelity(b.format, r));
      try {
        const restored = await run("restore", body);
        expect(restored.status, `${r.name}: ${restored.error}`).toBe("complete");
        // Sockets aside: no backup carries them (the table's `sockets` row).
        expect((await agent(dst, "POST", "/v1/manifest", { path: PATH })).entries).toEqual(sourceManifest.entries.filter((e: { path: string }) => sourceTree[e.path]?.type !== "socket"));
        const walk: Walk = await fidelity("walk", dst);
        expect(contentDifferences(sourceTree, walk), `${b.name} → ${r.name}`).toEqual([]);
        const got: Record<string, string> = { ...judge(sourceTree, walk), "non-utf8-names": refused, ...(longNames ? { "long-names": longNames } : {}) };
        for (const [p, why] of Object.entries(made)) if (why !== true) got[p] = `untested: ${why}`;
        table.push({ backup: b.name, restore: r.name, got });
        const measured = Object.fromEntries(FIDELITY_PROPERTIES.map((p) => [p, got[p]!.startsWith("untested") ? declared[p] : (got[p]!.split(":")[0] as Outcome)]));
        expect(measured, `${b.name} → ${r.name}: ${JSON.stringify(got)}`).toEqual(declared);
      } finally {
        // Unmounts what a mount restore left, then drops the sandbox's root.
        await agent(dst, "DELETE", "/v1/sandbox");
      }
    }
  });
});

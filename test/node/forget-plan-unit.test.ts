// restic forget's rules as planForget applies them (src/snapshots/forget-plan.ts): keepLast, keepDaily and
// keepWeekly buckets (newest of each bucket, n newest buckets), ttl expiry over policy, bases of kept deltas kept,
// removal order dependants first.
import { describe, expect, it } from "vitest";
import { isoWeek, planForget, type Policy } from "../../src/snapshots/forget-plan.ts";
import type { SnapshotSummary } from "../../src/snapshots/records.ts";

const snap = (id: string, createdAt: string, extra: Partial<SnapshotSummary> = {}): SnapshotSummary => ({
  id, createdAt, strategy: "tar-zst-pipe", source: { sandboxId: "s", path: "/workspace" }, archiveBytes: 1, files: 1, bytes: 1, ...extra,
});
const policy = (rules: Partial<Policy>): Policy => ({ sandboxId: "s", path: "/workspace", ...rules });
const NOW = Date.parse("2026-11-23T12:00:00Z");

describe("planForget", () => {
  const week = [
    snap("a", "2026-11-16T08:00:00Z"), // Monday, week 47
    snap("b", "2026-11-20T08:00:00Z"), // Friday, week 47
    snap("c", "2026-11-21T08:00:00Z"), // Saturday
    snap("d", "2026-11-22T08:00:00Z"), // Sunday, 08:00
    snap("e", "2026-11-22T20:00:00Z"), // Sunday, 20:00
    snap("f", "2026-11-23T09:00:00Z"), // Monday, week 48
  ];

  it("keepDaily keeps the newest of each of the n newest days", () => {
    const p = planForget(week, [policy({ keepDaily: 3 })], NOW);
    expect(p.kept.map((k) => [k.id, k.reasons])).toEqual([["c", ["daily 2026-11-21"]], ["e", ["daily 2026-11-22"]], ["f", ["daily 2026-11-23"]]]);
    expect(p.removed.map((r) => r.id).sort()).toEqual(["a", "b", "d"]);
  });

  it("keepWeekly keeps the newest of each ISO week; keepLast adds the newest n; reasons combine", () => {
    const p = planForget(week, [policy({ keepWeekly: 2, keepLast: 2 })], NOW);
    expect(Object.fromEntries(p.kept.map((k) => [k.id, k.reasons]))).toEqual({ e: ["last 2 of 2", "weekly 2026-W47"], f: ["last 1 of 2", "weekly 2026-W48"] });
  });

  it("snapshots without a policy stay; expired ones go even when a policy would keep them", () => {
    const snaps = [snap("x", "2026-11-22T00:00:00Z", { expiresAt: "2026-11-23T00:00:00Z" }), snap("y", "2026-11-22T01:00:00Z", { source: { sandboxId: "t", path: "/workspace" } })];
    const p = planForget(snaps, [policy({ keepLast: 5 })], NOW);
    expect(p.removed).toEqual([{ id: "x", reason: "expired at 2026-11-23T00:00:00Z" }]);
    expect(p.kept).toEqual([{ id: "y", reasons: ["no policy"] }]);
  });

  it("keeps every base of a kept delta, and removes dependants before their bases", () => {
    const snaps = [
      snap("full", "2026-11-20T00:00:00Z", { expiresAt: "2026-11-21T00:00:00Z" }),
      snap("d1", "2026-11-21T00:00:00Z", { base: "full" }),
      snap("d2", "2026-11-22T00:00:00Z", { base: "d1" }),
      snap("old", "2026-11-10T00:00:00Z"),
      snap("old-d", "2026-11-11T00:00:00Z", { base: "old" }),
    ];
    const p = planForget(snaps, [policy({ keepLast: 1 })], NOW);
    expect(Object.fromEntries(p.kept.map((k) => [k.id, k.reasons]))).toEqual({ full: ["base of d1"], d1: ["base of d2"], d2: ["last 1 of 1"] });
    expect(p.removed.map((r) => r.id)).toEqual(["old-d", "old"]);
  });

  it("isoWeek follows ISO 8601 at year boundaries", () => {
    expect(isoWeek(new Date("2027-01-01T00:00:00Z"))).toBe("2026-W53");
    expect(isoWeek(new Date("2025-12-29T00:00:00Z"))).toBe("2026-W01");
  });

  it("a kept delta's bases stay down to a compacted one, whose compaction stays instead; a compaction nothing kept resolves through goes", () => {
    const snaps = [
      snap("img", "2026-11-23T01:00:00Z"),
      snap("d1", "2026-11-23T02:00:00Z", { base: "img" }),
      snap("d2", "2026-11-23T03:00:00Z", { base: "d1" }),
      snap("d3", "2026-11-23T04:00:00Z", { base: "d2" }),
      snap("c1", "2026-11-23T03:30:00Z", { compacts: "d1", source: { sandboxId: "compactor-x", path: "/workspace/tree" } }),
      snap("c0", "2026-11-23T02:30:00Z", { compacts: "gone", source: { sandboxId: "compactor-y", path: "/workspace/tree" } }),
    ];
    const p = planForget(snaps, [policy({ keepLast: 1 })], NOW);
    expect(Object.fromEntries(p.kept.map((k) => [k.id, k.reasons]))).toEqual({ d3: ["last 1 of 1"], d2: ["base of d3"], c1: ["compaction under d2"] });
    expect(p.removed.map((r) => r.id).sort()).toEqual(["c0", "d1", "img"]);
  });
});

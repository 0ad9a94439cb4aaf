// The load run's criteria (scripts/bench/load/load-verdicts.ts) and its readings of /proc: a leak, a failed run, a
// descriptor or mount left behind must each fail the verdict; a flat run with everything back must pass.
import { describe, expect, it } from "vitest";
import { halves, judge, RSS_SLACK } from "../../scripts/bench/load/load-verdicts.ts";
import { fdCount, mountsUnder, type ResourceSample } from "../../scripts/bench/load/resources.ts";

const MiB = 2 ** 20;
const sample = (over: Partial<ResourceSample> = {}): ResourceSample => ({ t: 0, phase: "matrix", workerdRss: 300 * MiB, agentRss: 80 * MiB, workerdFds: 40, workerdWorkflowDbFds: 0, workflowInstancesOpen: 0, agentFds: 20, mounts: 0, ...over });
const flat = Array.from({ length: 40 }, (_, i) => sample({ t: i * 1000, workerdRss: (300 + (i % 3)) * MiB }));
const leaking = Array.from({ length: 40 }, (_, i) => sample({ t: i * 1000, workerdRss: (300 + i * 10) * MiB }));
const ok = { kind: "backup" as const, id: "bk-1", sandboxId: "s", strategy: "tar-zst-pipe", status: "complete", ms: 1000 };
const matrix = { id: "mx-1", ms: 1, progress: { total: 2, done: 2, failed: 0, sent: 2, status: "complete", deadLettered: [] }, summary: { rows: [] } };

describe("load verdicts", () => {
  it("memory flat within the slack passes; memory growing through the runs fails", () => {
    expect(halves(flat.map((s) => s.workerdRss)).ok).toBe(true);
    expect(halves(leaking.map((s) => s.workerdRss))).toMatchObject({ ok: false });
    expect(halves([1, 2]).ok).toBe(false); // too few samples to say
    expect(halves([100 * MiB, 100 * MiB, 100 * MiB + RSS_SLACK, 100 * MiB + RSS_SLACK]).ok).toBe(true);
  });

  it("a clean run passes; a failed run, a descriptor leak or a mount left behind each fail it", () => {
    const base = { firsts: [ok], burst: [ok, { ...ok, kind: "restore" as const }], matrix, matrixSamples: flat, before: sample(), after: sample({ workerdFds: 45 }), cleanupErrors: [] };
    expect(judge(base)).toMatchObject({ ok: true, failures: [], fdsBack: true, mountsBack: true });
    expect(judge({ ...base, burst: [{ ...ok, status: "errored", error: "boom" }] })).toMatchObject({ ok: false, failures: [expect.stringContaining("boom")] });
    expect(judge({ ...base, after: sample({ agentFds: 60 }) })).toMatchObject({ ok: false, fdsBack: false });
    expect(judge({ ...base, after: sample({ mounts: 1 }) })).toMatchObject({ ok: false, mountsBack: false });
    // The Workflows engine's instance databases (three files each) are not ours; anything beside them is.
    expect(judge({ ...base, after: sample({ workerdFds: 340, workerdWorkflowDbFds: 300, workflowInstancesOpen: 100 }) }).fdsBack).toBe(true);
    expect(judge({ ...base, after: sample({ workerdFds: 340, workerdWorkflowDbFds: 300, workflowInstancesOpen: 90 }) }).fdsBack).toBe(false);
    expect(judge({ ...base, matrixSamples: leaking }).ok).toBe(false);
    expect(judge({ ...base, matrix: { ...matrix, progress: { ...matrix.progress, deadLettered: [{ reason: "x" }] } } }).failures).toEqual(["dead-lettered: x"]);
  });

  it("reads this process's descriptors and the mount table", () => {
    expect(fdCount([process.pid])).toBeGreaterThan(2);
    expect(mountsUnder("/")).toContain("/");
    expect(mountsUnder("/no/such/root")).toEqual([]);
  });
});

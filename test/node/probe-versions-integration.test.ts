// The probe reports a version for every tool it finds on this machine (PATH as the agent has it: the node project
// puts native/lazy/bin first), not "unknown": a run's record says which tar, zstd, mksquashfs or snapflow-lazy
// served it. In CI every one is installed (scripts/setup.sh); elsewhere a missing tool is null and not checked here.
import { tmpdir } from "node:os";
import { expect, it } from "vitest";
import { probe } from "../../container/system/probe.ts";
import { TOOLS } from "../../container/contract/protocol.ts";

it("every tool found has a version", async () => {
  const { tools } = await probe(tmpdir());
  expect(Object.keys(tools).sort()).toEqual(Object.keys(TOOLS).sort());
  const found = Object.entries(tools).filter(([, t]) => t !== null);
  expect(found.length).toBeGreaterThan(0);
  expect(Object.fromEntries(found.filter(([, t]) => !/^\d+\.\d+/.test(t!.version)).map(([n, t]) => [n, t!.version]))).toEqual({});
});

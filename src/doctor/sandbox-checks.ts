// The sandbox: it starts and its agent answers, the agent is this Worker's release, and it has the tools (at the
// versions whose flags snapflow passes) and the kernel capabilities the presets need. A lack is named with the
// presets it takes away: those are refused at their probe step (strategy_unavailable), never half-run.
import { SNAPFLOW_RELEASE, type ProbeResult } from "../../container/contract/protocol.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import { STRATEGIES, TOOL_MINIMUMS, versionAtLeast, type Capability } from "../strategies/registry.ts";
import { runCheck, type DoctorCheck } from "./doctor-check.ts";

export const SANDBOX_CHECKS = {
  starts: "sandbox: starts and its agent answers",
  release: "sandbox: the agent is the Worker's release",
  tools: "sandbox: the presets' tools, at versions their flags need",
  fuse: "sandbox: FUSE (/dev/fuse)",
  cap_sys_admin: "sandbox: CAP_SYS_ADMIN",
  "fs:squashfs": "sandbox: the kernel's squashfs",
  "fs:erofs": "sandbox: the kernel's erofs",
  "fs:overlay": "sandbox: the kernel's overlay",
} as const;

const CAPABILITIES = ["fuse", "cap_sys_admin", "fs:squashfs", "fs:erofs", "fs:overlay"] as const satisfies readonly Capability[];

const has = (probe: ProbeResult, need: (typeof CAPABILITIES)[number]) =>
  need === "fuse" ? probe.fuse : need === "cap_sys_admin" ? probe.capSysAdmin : probe.filesystems.includes(need.slice(3));

const presetsNeeding = (need: Capability) => STRATEGIES.filter((s) => s.needs?.includes(need)).map((s) => s.name);

/** The probe first (everything else reads it); undefined when the sandbox did not answer (its check says why). */
export async function sandboxChecks(agent: AgentClient): Promise<{ checks: DoctorCheck[]; probe?: ProbeResult }> {
  let probe: ProbeResult | undefined;
  const checks = [await runCheck(SANDBOX_CHECKS.starts, "nothing can be backed up or restored in this deployment's sandboxes", async () => {
    probe = await agent.probe();
    return { ok: true, detail: `${agent.sandboxId}: ${probe.runtime}, kernel ${probe.kernel}, ${probe.cpus} CPUs, ${Math.round(probe.disk.freeBytes / 2 ** 30)} GiB free at ${probe.disk.path}` };
  })];
  if (!probe) return { checks };
  const p = probe;
  checks.push(await runCheck(SANDBOX_CHECKS.release, "the agent and the Worker share one protocol module: an agent of another release may answer what this Worker refuses (bad_answer) or lack a route; rebuild and redeploy the image with the Worker (npx wrangler deploy)", async () => {
    const theirs = p.agent?.release;
    return theirs === SNAPFLOW_RELEASE ? { ok: true, detail: `both ${SNAPFLOW_RELEASE}` } : { ok: false, detail: `the agent is ${theirs ?? "older than the release field"}, the Worker ${SNAPFLOW_RELEASE}` };
  }));
  checks.push(await runCheck(SANDBOX_CHECKS.tools, "presets needing a missing or older tool are refused at their probe step (strategy_unavailable), naming the tool", async () => {
    const needed = [...new Set(STRATEGIES.flatMap((s) => s.requires))].sort();
    const missing = needed.filter((t) => !p.tools[t]);
    const old = needed.filter((t) => p.tools[t] && TOOL_MINIMUMS[t] && !versionAtLeast(p.tools[t]!.version, TOOL_MINIMUMS[t]!.version));
    const versions = needed.filter((t) => p.tools[t]).map((t) => `${t} ${p.tools[t]!.version}`).join(", ");
    if (!missing.length && !old.length) return { ok: true, detail: versions };
    const lost = STRATEGIES.filter((s) => s.requires.some((t) => missing.includes(t) || old.includes(t))).map((s) => s.name);
    const why = [...missing.map((t) => `${t} missing`), ...old.map((t) => `${t} ${p.tools[t]!.version} < ${TOOL_MINIMUMS[t]!.version} (${TOOL_MINIMUMS[t]!.why})`)];
    return { ok: false, detail: `${why.join("; ")}: unavailable ${lost.join(", ")}; present: ${versions}` };
  }));
  for (const need of CAPABILITIES) {
    const users = presetsNeeding(need);
    checks.push(await runCheck(SANDBOX_CHECKS[need], `unavailable (refused at their probe step, naming what is missing): ${users.join(", ")}`, async () =>
      has(p, need) ? { ok: true, detail: `present; needed by ${users.length} presets` } : { ok: false, detail: `absent: ${users.length} presets unavailable` }));
  }
  return { checks, probe };
}

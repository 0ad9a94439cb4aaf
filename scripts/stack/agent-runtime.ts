// Which runtime runs the host agent, and how. Production bundles container/agent.ts with Bun and runs the bundle
// under Bun (the Dockerfile's agent-build stage); the local stack and the tests run the source under Node 22 by
// default. SNAPFLOW_AGENT_RUNTIME=bun makes them run what production runs instead:
//   1. the Dockerfile's own build step, `bun build container/agent.ts --target=bun`, into the stack's directory
//      (BUN_BUILD_FLAGS; test/node/dockerfile-unit.test.ts checks the Dockerfile uses exactly these), against the
//      packages package-lock.json pinned;
//   2. `bun agent.js`, with the same environment the Node agent gets.
// Bun comes from the npm package "bun" (a devDependency: node_modules/.bin/bun), or from PATH.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { delimiter, join } from "node:path";

export const AGENT_RUNTIMES = ["node", "bun"] as const;
export type AgentRuntime = (typeof AGENT_RUNTIMES)[number];

/** The Dockerfile's `bun build` flags, less --outfile. */
export const BUN_BUILD_FLAGS = ["--target=bun"] as const;
const AGENT_ENTRY = "container/agent.ts";

/** SNAPFLOW_AGENT_RUNTIME: unset or "node" is Node (the default), "bun" is Bun. Anything else is an error. */
export function agentRuntimeFrom(value: string | undefined): AgentRuntime {
  if (value === undefined || value === "") return "node";
  if ((AGENT_RUNTIMES as readonly string[]).includes(value)) return value as AgentRuntime;
  throw new Error(`SNAPFLOW_AGENT_RUNTIME=${value}: expected one of ${AGENT_RUNTIMES.join(", ")}`);
}

/** node_modules/.bin/bun (the devDependency), else the first bun on PATH. */
export function findBun(project: string): string {
  for (const dir of [join(project, "node_modules/.bin"), ...(process.env.PATH ?? "").split(delimiter)]) {
    if (dir && existsSync(join(dir, "bun"))) return join(dir, "bun");
  }
  throw new Error("SNAPFLOW_AGENT_RUNTIME=bun: no bun in node_modules/.bin or on PATH (npm install brings it: the devDependency bun)");
}

/**
 * The command that starts the agent under `runtime`. For Bun it first bundles the agent into `dir` as the
 * Dockerfile does (once per call: call it once per stack, not per restart) and names the Bun it ran in `describe`.
 */
export function agentCommand(runtime: AgentRuntime, project: string, dir: string): { argv: string[]; describe: string } {
  if (runtime === "node") return { argv: [process.execPath, join(project, AGENT_ENTRY)], describe: `node ${process.version}, ${AGENT_ENTRY}` };
  const bun = findBun(project);
  mkdirSync(dir, { recursive: true });
  const outfile = join(dir, "agent.js");
  const r = spawnSync(bun, ["build", AGENT_ENTRY, ...BUN_BUILD_FLAGS, `--outfile=${outfile}`], { cwd: project, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`bun build ${AGENT_ENTRY} failed (${r.error?.message ?? `exit ${r.status}`}):\n${r.stdout}${r.stderr}`);
  const version = spawnSync(bun, ["--version"], { encoding: "utf8" }).stdout.trim();
  return { argv: [bun, outfile], describe: `bun ${version}, ${outfile} (bun build ${BUN_BUILD_FLAGS.join(" ")})` };
}

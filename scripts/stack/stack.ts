// The embedded local stack: a real S3 server (SeaweedFS) standing in for R2's S3 endpoint, the snapflow agent
// as a host process (the same code as in the image, one root directory per sandbox id), and `wrangler dev`
// running the Worker, its Workflows, Queues and KV locally, configured to reach both.
//
// The running stack is described in .snapflow/stack.json (URLs and generated tokens), so that `npm start`
// and the CLI find it; the file is removed when the stack stops.
//
// Restarts: the secrets and the agent's and store's ports are kept in the stack's directory (stack-secrets.ts), so
// a stack started again — after Ctrl-C, a crash, or SIGKILL — serves the runs it left in flight with the same
// tokens and URLs; when it is up it fires the watchdog (src/runs/interrupted-runs.ts) with that moment, which
// resumes them or fails them with their cleanup done. With `supervise` (npm run dev) a dead agent or store is
// started again alone (supervisor.ts); `kill()` SIGKILLs every part at once, for tests of exactly that.
import { LIFECYCLE_CRON, STACK_START_TRIGGER } from "../../src/snapshots/lifecycle-schedule.ts";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { agentCommand, type AgentRuntime } from "./agent-runtime.ts";
import { SANDBOX_HEADER } from "../../container/contract/protocol.ts";
import { startObjectStore, type ObjectStoreServer } from "./object-store-server.ts";
import { detachMountsBelow } from "./detach-mounts.ts";
import { startManaged, waitReady, type Managed } from "./processes.ts";
import { loadSecrets, saveSecrets } from "./stack-secrets.ts";
import { supervise } from "./supervisor.ts";
import { freePort, portIsFree } from "./ports.ts";

export { freePort, portIsFree } from "./ports.ts";

export const PROJECT = resolve(import.meta.dirname, "../..");
export const STATE = join(PROJECT, ".snapflow");
const STACK_FILE = join(STATE, "stack.json");
export const BUCKET = "snapflow-snapshots";

export interface StackInfo {
  apiUrl: string;
  apiToken: string;
  agentUrl: string;
  s3Endpoint: string;
  pid: number;
  /** for memory sampling: wrangler dev (workerd runs below it) and the host agent */
  wranglerPid: number;
  agentPid: number;
}

export interface Stack extends StackInfo {
  stop(): Promise<void>;
  /** SIGKILL every part at once (wrangler with workerd, the agent, the store): a crash, for tests */
  kill(): Promise<void>;
  /** resolves when a part of the stack is down for good: wrangler dev exited, or a supervised part gave up */
  died: Promise<string>;
  /** the parts as they are now (the agent and the store change when the supervisor restarts them) */
  parts: { agent(): Managed; store(): ObjectStoreServer; wrangler: Managed; restarts(): { agent: number; store: number } };
  /** when wrangler dev answered, after the start-up sweep and watchdog were fired (ms since the epoch) */
  upAt: number;
}

/** Where a stack keeps its state (the secrets file, the store's data, the sandboxes). */
export const stackDir = (options: Pick<StackOptions, "privateDir">) => options.privateDir ?? join(STATE, "stack");

/** The secrets a stack in `dir` uses (tests read the API token of a stack they killed). */
export { loadSecrets as stackSecrets } from "./stack-secrets.ts";

/** wrangler's `--port N` for a local command (workflows … --local) aimed at this stack, or "" on its default 8787. */
export const wranglerPort = (apiUrl: string): string => {
  const port = new URL(apiUrl).port;
  return port && port !== "8787" ? ` --port ${port}` : "";
};

/** The stack described by .snapflow/stack.json, if it is up and answering. */
export async function findRunningStack(): Promise<StackInfo | null> {
  if (!existsSync(STACK_FILE)) return null;
  const info = JSON.parse(readFileSync(STACK_FILE, "utf8")) as StackInfo;
  try {
    const r = await fetch(`${info.apiUrl}/healthz`, { signal: AbortSignal.timeout(2000) });
    return r.ok ? info : null;
  } catch {
    return null;
  }
}

export interface StackOptions {
  port?: number;
  log?: (line: string) => void;
  /** a private stack (tests): its own state directory, and no .snapflow/stack.json for others to find */
  privateDir?: string;
  /**
   * restart the agent or the object store when it exits on its own (same port, data and secrets), at most
   * `maxRestarts` times in `windowMs` (default 5 in 60 s); `npm run dev` does. Off: the first exit ends `died`.
   * wrangler dev is not restarted: its exit ends `died` either way.
   */
  supervise?: boolean | { maxRestarts?: number; windowMs?: number };
  /** fire the watchdog and the lifecycle sweep once when up (default true; experiments turn it off to watch the engine alone) */
  startupTriggers?: boolean;
  /** what runs the agent: "node" on the source (default), or "bun" on the bundle production runs (agent-runtime.ts) */
  agentRuntime?: AgentRuntime;
  /**
   * something put in front of the object store (a proxy), started once the store is up: the Worker and the agent are
   * told its endpoint instead of the store's, so everything reaches the store through it. Stopped with the stack.
   * snapflow doctor against a store reached through a proxy that breaks one behaviour (test/e2e/doctor-broken-store).
   */
  storeFront?: (storeEndpoint: string) => Promise<{ endpoint: string; stop(): Promise<void> }>;
  /** more Worker variables (tests: STEP_RETRY_DELAY_FACTOR), written beside the stack's own */
  workerVars?: Record<string, string>;
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const log = options.log ?? ((l: string) => console.error(l));
  const port = options.port ?? 8787;
  const dir = stackDir(options);
  const publish = options.privateDir === undefined;
  const logs = publish ? join(STATE, "logs") : join(dir, "logs");
  mkdirSync(logs, { recursive: true });
  // The same secrets and ports as the stack's last start (stack-secrets.ts): runs it left in flight resume
  // against the same agent and store, with tokens and signed URLs that still hold.
  const secrets = loadSecrets(dir, log);
  const { apiToken, agentSecret } = secrets;
  const started: { stop(): Promise<void>; kill(): Promise<void> }[] = [];
  const stopAll = async () => {
    for (const s of [...started].reverse()) await s.stop().catch(() => {});
    // Its processes gone, what they mounted goes too (detach-mounts.ts): nothing dead stays mounted.
    const detached = detachMountsBelow(join(dir, "sandboxes"));
    if (detached.length) log(`stack: detached ${detached.length} mount(s) the sandboxes held`);
    if (publish) rmSync(STACK_FILE, { force: true });
  };
  const killAll = async () => {
    await Promise.all(started.map((s) => s.kill().catch(() => {})));
    if (publish) rmSync(STACK_FILE, { force: true });
  };
  const sup = options.supervise === undefined || options.supervise === false ? { restart: false } : { restart: true, ...(options.supervise === true ? {} : options.supervise) };

  try {
    const t0 = performance.now();
    const startStore = (s3Port: number) => startObjectStore({ dir: join(dir, "s3"), bucket: BUCKET, log, accessKeyId: secrets.s3AccessKeyId, secretAccessKey: secrets.s3SecretAccessKey, ...(s3Port ? { port: s3Port } : {}) });
    // The last start's port when it is still free; another one if something took it (the Worker is told anew).
    const firstStore = await startStore(secrets.s3Port && (await portIsFree(secrets.s3Port)) ? secrets.s3Port : 0);
    secrets.s3Port = Number(new URL(firstStore.endpoint).port);
    const store = supervise("object store", firstStore, () => startStore(secrets.s3Port), { log, ...sup });
    started.push(store);
    log(`stack: object store ready at ${firstStore.endpoint} (${Math.round(performance.now() - t0)} ms)`);
    // What the Worker and the agent are told: the store, or what stands in front of it.
    let storeEndpoint = firstStore.endpoint;
    if (options.storeFront) {
      const front = await options.storeFront(firstStore.endpoint);
      started.push({ stop: front.stop, kill: front.stop });
      storeEndpoint = front.endpoint;
      log(`stack: the Worker and the agent reach the store through ${storeEndpoint}`);
    }

    // Bundled once (Bun): a restarted agent runs the same file.
    const agentRun = agentCommand(options.agentRuntime ?? "node", PROJECT, join(dir, "agent-bundle"));
    const startAgentAt = (agentPort: number) => startAgent({ secret: agentSecret, storeEndpoint, sandboxesDir: join(dir, "sandboxes"), logFile: join(logs, "agent.log"), port: agentPort, argv: agentRun.argv });
    const firstAgent = await startAgentAt(secrets.agentPort && (await portIsFree(secrets.agentPort)) ? secrets.agentPort : 0);
    secrets.agentPort = Number(new URL(firstAgent.url).port);
    const agent = supervise("agent", firstAgent.process, async () => (await startAgentAt(secrets.agentPort)).process, { log, ...sup });
    started.push(agent);
    log(`stack: agent ready at ${firstAgent.url} (${agentRun.describe})`);
    saveSecrets(dir, secrets);

    const vars = {
      SANDBOX_TRANSPORT: "local",
      OBJECT_STORE: "s3",
      AGENT_URL: firstAgent.url,
      AGENT_SECRET: agentSecret,
      API_TOKEN: apiToken,
      S3_ENDPOINT: storeEndpoint,
      S3_BUCKET: BUCKET,
      S3_REGION: "auto",
      S3_ACCESS_KEY_ID: firstStore.accessKeyId,
      S3_SECRET_ACCESS_KEY: firstStore.secretAccessKey,
      ...options.workerVars,
    };
    const envFile = join(publish ? STATE : dir, "dev.vars");
    writeFileSync(envFile, Object.entries(vars).map(([k, v]) => `${k}=${v}`).join("\n") + "\n", { mode: 0o600 });
    // Another process on the port would answer our readiness check and then refuse our token: say so instead.
    if (!(await portIsFree(port))) throw new Error(`port ${port} is in use (another snapflow stack or wrangler dev?); stop it or pick another port`);
    const t1 = performance.now();
    const wrangler = startManaged("wrangler dev", [join(PROJECT, "node_modules/.bin/wrangler"), "dev", "--ip", "127.0.0.1", "--port", String(port), "--env-file", envFile, "--show-interactive-dev-session=false", ...(publish ? [] : ["--persist-to", join(dir, "wrangler-state")])], {
      cwd: PROJECT,
      env: toolEnv(),
      logFile: join(logs, "wrangler.log"),
    });
    started.push(wrangler);
    const apiUrl = `http://127.0.0.1:${port}`;
    await waitReady(wrangler, async () => (await fetch(`${apiUrl}/healthz`)).ok, 60_000);
    const upAt = Date.now();
    log(`stack: wrangler dev ready at ${apiUrl} (${Math.round(performance.now() - t1)} ms)`);
    // What a stack stopped mid-run left behind is dealt with now, not at the next trigger: runs it left in flight
    // are found by the watchdog (src/runs/interrupted-runs.ts) and resumed, restarted or failed with their cleanup
    // done; then the lifecycle cron (src/snapshots/lifecycle-cron.ts) sweeps what no live run owns in the store.
    // The agent sweeps its sandboxes itself when it starts (container/system/sweep.ts).
    if (options.startupTriggers !== false) await fireStartupTriggers(apiUrl, upAt, log);

    const info: StackInfo = { apiUrl, apiToken, agentUrl: firstAgent.url, s3Endpoint: storeEndpoint, pid: process.pid, wranglerPid: wrangler.child.pid!, agentPid: firstAgent.process.child.pid! };
    if (publish) writeFileSync(STACK_FILE, JSON.stringify(info, null, 1), { mode: 0o600 });
    const died = Promise.race([store.gaveUp, agent.gaveUp, wrangler.exited.then(() => "wrangler dev exited unexpectedly")]);
    return {
      ...info,
      stop: stopAll,
      kill: killAll,
      died,
      upAt,
      parts: { agent: agent.current, store: store.current, wrangler, restarts: () => ({ agent: agent.restarts(), store: store.restarts() }) },
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

/**
 * The watchdog for interrupted runs, then the lifecycle sweep, each fired once through wrangler's scheduled
 * handler. The watchdog is told when the stack came up: a run that has not moved since then was interrupted.
 */
async function fireStartupTriggers(apiUrl: string, upAt: number, log: (line: string) => void): Promise<void> {
  for (const [what, cron] of [["watchdog", STACK_START_TRIGGER], ["start-up sweep", LIFECYCLE_CRON]] as const) {
    const r = await fetch(`${apiUrl}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent(cron)}&time=${upAt}`).catch((e: Error) => e);
    if (r instanceof Error || !r.ok) log(`stack: the ${what} did not run (${r instanceof Error ? r.message : `HTTP ${r.status}`}); its cron trigger will`);
    else await r.body?.cancel();
  }
}

/** Keeps wrangler from writing outside the project or phoning home. */
export function toolEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    // wrangler's shebang finds `node` on PATH: make that the Node 22 running us, whoever started us.
    PATH: `${dirname(process.execPath)}:${join(PROJECT, "node_modules/.bin")}:${process.env.PATH ?? ""}`,
    WRANGLER_SEND_METRICS: "false",
    WRANGLER_LOG_PATH: join(STATE, "logs"),
    XDG_CONFIG_HOME: join(STATE, "xdg"),
  };
}

export async function startAgent(options: {
  secret: string;
  storeEndpoint: string;
  sandboxesDir: string;
  logFile: string;
  faults?: boolean;
  port?: number;
  storeIdleSeconds?: number;
  /** what runs the agent (agent-runtime.ts agentCommand; default: this Node on container/agent.ts) */
  argv?: string[];
}): Promise<{ url: string; process: Managed }> {
  mkdirSync(options.sandboxesDir, { recursive: true });
  let announced: (port: number) => void;
  const portKnown = new Promise<number>((r) => (announced = r));
  const agent = startManaged("agent", options.argv ?? agentCommand("node", PROJECT, "").argv, {
    // The least it needs: no inherited credentials (S3 keys, API tokens in the developer's shell), only the
    // secret it checks sandbox tokens with.
    env: {
      ...pick(process.env, ["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SNAPFLOW_SANDBOX_ROOTS", "SNAPFLOW_PACK_ENGINE"]),
      // snapflow-lazy is built into the repository (native/lazy/build.sh), not installed: the agent finds it on PATH.
      PATH: `${join(PROJECT, "native/lazy/bin")}:${process.env.PATH ?? ""}`,
      SNAPFLOW_AGENT_SECRET: options.secret,
      SNAPFLOW_AGENT_STORE_ORIGIN: options.storeEndpoint,
      SNAPFLOW_AGENT_PORT: String(options.port ?? 0),
      SNAPFLOW_AGENT_HOST: "127.0.0.1",
      SNAPFLOW_AGENT_SANDBOXES_DIR: options.sandboxesDir,
      SNAPFLOW_AGENT_FAULTS: options.faults ? "1" : "0",
      ...(options.storeIdleSeconds ? { SNAPFLOW_AGENT_STORE_IDLE_SECONDS: String(options.storeIdleSeconds) } : {}),
    },
    logFile: options.logFile,
    onLine: (line) => {
      if (line.startsWith("{")) {
        const m = JSON.parse(line) as { agent?: string; port?: number };
        if (m.agent === "listening" && m.port) announced(m.port);
      }
    },
  });
  const port = await Promise.race([portKnown, agent.exited.then(() => { throw new Error(`agent exited during start-up:\n${agent.tail()}`); })]);
  const url = `http://127.0.0.1:${port}`;
  // Readiness is authenticated too: ask as some sandbox, with its derived token.
  const probe = "readiness";
  const headers = { authorization: `Bearer ${await agentTokenFor(options.secret, probe)}`, [SANDBOX_HEADER]: probe };
  await waitReady(agent, async () => (await fetch(`${url}/v1/health`, { headers })).ok, 10_000);
  return { url, process: agent };
}

function pick(env: NodeJS.ProcessEnv, names: string[]): NodeJS.ProcessEnv {
  return Object.fromEntries(names.filter((n) => env[n] !== undefined).map((n) => [n, env[n]]));
}

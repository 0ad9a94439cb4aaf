// Timed shell pipelines for the peers race: `bash -o pipefail -c`, so that a failing stage of `a | b | c` fails
// the whole measurement, with the command and its last stderr lines in the error.
import { spawn } from "node:child_process";

export interface ShellOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export class CommandError extends Error {}

/** Runs `script` and resolves with its wall milliseconds and stdout; rejects naming the command on failure. */
export function sh(script: string, options: ShellOptions = {}): Promise<{ ms: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn("bash", ["-o", "pipefail", "-c", script], { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    child.on("error", (e) => reject(new CommandError(`${script}: ${e.message}`)));
    child.on("close", (code, signal) => {
      const ms = Math.round(performance.now() - t0);
      if (code === 0) resolve({ ms, stdout });
      else reject(new CommandError(`command failed (${signal ?? `exit ${code}`}): ${script}\n${stderr.trim().split("\n").slice(-8).join("\n")}`));
    });
  });
}

/** Single-quotes a value for bash. */
export const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Tools the race needs, with the Debian package that provides each (scripts/setup.sh installs them). */
const TOOL_PACKAGES: Record<string, string> = { tar: "tar", zstd: "zstd", rclone: "rclone", restic: "restic", sync: "coreutils", git: "git", npm: "npm" };

/** Fails with one message naming every missing tool and its Debian package. */
export async function requireTools(tools: string[]): Promise<void> {
  const missing: string[] = [];
  for (const t of tools) {
    await sh(`command -v ${q(t)}`).catch(() => missing.push(t));
  }
  if (missing.length) {
    const pkgs = [...new Set(missing.map((t) => TOOL_PACKAGES[t] ?? t))].join(" ");
    throw new CommandError(`missing tools for the peers race: ${missing.join(", ")}; install the Debian packages: apt-get install ${pkgs} (or run scripts/setup.sh as root)`);
  }
}

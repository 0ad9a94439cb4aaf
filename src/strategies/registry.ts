// The strategy registry: every way snapflow can move a workspace, as data. A strategy is
// format × path × materialization plus the tools it needs; the seeds' strategy names are presets of it, so
// our result tables line up with theirs row by row. Adding a preset is adding an entry here.
import type { TarFormat } from "../../container/protocol.ts";
import type { ToolName } from "../../container/protocol.ts";

/** How archive bytes travel from the sandbox to the store. */
export type BackupPath =
  | "stream" // archive to a file in the sandbox, then its raw bytes → FixedLengthStream → single put
  | "multipart"; // archive piped as the response body → equal-size parts → multipart from the Worker

/** How archive bytes travel from the store into the sandbox, and what becomes of them there. */
export type RestorePath =
  | "push-file" // store → Worker → agent request body → file, then extract
  | "push-pipe"; // store → Worker → agent request body piped straight into the extractor

export interface BackupStrategy {
  name: string;
  kind: "backup";
  description: string;
  format: TarFormat;
  path: BackupPath;
  requires: ToolName[];
  /** the seed report this preset reproduces, when it is one of theirs */
  seed?: string;
}

export interface RestoreStrategy {
  name: string;
  kind: "restore";
  description: string;
  /** restores snapshots of this format */
  format: TarFormat;
  path: RestorePath;
  requires: ToolName[];
  seed?: string;
}

export type Strategy = BackupStrategy | RestoreStrategy;

const zstd3: TarFormat = { kind: "tar", compression: "zstd", level: 3, threads: 0 };

const SEED_R2 = "r2-backup-restore-benchmark.md";

export const STRATEGIES: readonly Strategy[] = [
  {
    name: "tar-zst-direct", kind: "backup", seed: SEED_R2, format: zstd3, path: "stream", requires: ["tar", "zstd"],
    description: "tar | zstd -3 -T0 to a file in the sandbox, then its raw bytes → FixedLengthStream → one put",
  },
  {
    name: "tar-zst-pipe", kind: "backup", seed: SEED_R2, format: zstd3, path: "multipart", requires: ["tar", "zstd"],
    description: "tar | zstd -3 -T0 streamed as the agent's response → equal-size parts → multipart upload, bounded memory",
  },
  {
    name: "restore-tar-zst", kind: "restore", seed: SEED_R2, format: zstd3, path: "push-file", requires: ["tar", "zstd"],
    description: "store → Worker → agent PUT to a file, then tar+zstd extract",
  },
  {
    name: "restore-tar-zst-pipe", kind: "restore", seed: SEED_R2, format: zstd3, path: "push-pipe", requires: ["tar", "zstd"],
    description: "store → Worker → agent PUT piped into zstd -d | tar x (nothing staged on disk)",
  },
];

export const DEFAULT_BACKUP = "tar-zst-pipe";

export function findStrategy(name: string): Strategy | undefined {
  return STRATEGIES.find((s) => s.name === name);
}

/** Restore strategies that can read a snapshot made with `format`. */
export function restoresFor(format: TarFormat): RestoreStrategy[] {
  return STRATEGIES.filter((s): s is RestoreStrategy => s.kind === "restore" && s.format.compression === format.compression);
}

/** Why a strategy cannot run in a sandbox with these tools, or undefined when it can. */
export function unavailableReason(s: Strategy, tools: Record<string, unknown>): string | undefined {
  const missing = s.requires.filter((t) => !tools[t]);
  return missing.length ? `missing tool${missing.length > 1 ? "s" : ""}: ${missing.join(", ")}` : undefined;
}

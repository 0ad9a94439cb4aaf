// Pure: the argv of tar for a format. No I/O, so tests can check every combination cheaply.
import type { TarFormat } from "../contract/protocol.ts";

/** The program tar pipes through (`tar -I`), or undefined for a plain tar. */
export function compressProgram(f: TarFormat): string | undefined {
  switch (f.compression) {
    case "none":
      return undefined;
    case "zstd": {
      // Negative levels are zstd's fast levels, spelt --fast=N (zstd refuses "--3").
      const level = f.level ?? 3;
      return ["zstd", level < 0 ? `--fast=${-level}` : `-${level}`, `-T${f.threads ?? 0}`, ...(f.long ? ["--long=27"] : [])].join(" ");
    }
    case "gzip":
      return `gzip -${f.level ?? 6}`;
    case "pigz":
      return ["pigz", `-${f.level ?? 6}`, ...(f.threads ? [`-p ${f.threads}`] : [])].join(" ");
    case "lz4":
      return `lz4 -${f.level ?? 1}`;
  }
}

export function decompressProgram(f: TarFormat): string | undefined {
  switch (f.compression) {
    case "none":
      return undefined;
    case "zstd":
      // --long=31 accepts any window the archive was made with; without it a --long archive fails to decode.
      return `zstd -d -T${f.threads ?? 0} --long=31`;
    case "gzip":
      return "gzip -d";
    case "pigz":
      return "pigz -d";
    case "lz4":
      return "lz4 -d";
  }
}

/** tar writing an archive of `dir`'s contents to stdout; with `filesFrom`, only the listed entries (a delta). */
export function tarCreateArgv(dir: string, f: TarFormat, filesFrom?: string): string[] {
  const program = compressProgram(f);
  const what = filesFrom ? ["--no-recursion", "--null", "-T", filesFrom] : ["."];
  return ["tar", "--numeric-owner", "--sparse", "-C", dir, ...(program ? ["-I", program] : []), "-cf", "-", ...what];
}

/** tar reading an archive from stdin into `dir`, keeping permissions and mtimes. */
export function tarExtractArgv(dir: string, f: TarFormat): string[] {
  const program = decompressProgram(f);
  // Owners as archived (numeric; tar's default as root) and modes (-p), into a 0700 staging directory: foreign
  // owners and setuid/setgid bits are reset after unless the restore keeps them (safe-extract.ts,
  // sanitize-extracted.ts). A non-root agent's tar keeps no owners, and so cannot keep them when asked.
  return ["tar", "--numeric-owner", "-p", "-C", dir, ...(program ? ["-I", program] : []), "-xf", "-"];
}

/** The file name extension conventionally used for a format. */
export function archiveExtension(f: TarFormat): string {
  return { none: "tar", zstd: "tar.zst", gzip: "tar.gz", pigz: "tar.gz", lz4: "tar.lz4" }[f.compression];
}

/**
 * tar writing a plain (uncompressed) archive to stdout of exactly the entries named on its stdin, NUL-separated,
 * in that order (the single-pass archiver's metadata walk feeds it; the agent compresses). No --sparse: the
 * agent's tar parser does not decode GNU sparse maps, and the manifest must hash the file's real content.
 * --verbatim-files-from: a name is a name, never an option, whatever it starts with.
 */
export function tarCreateFromStdinArgv(dir: string): string[] {
  return ["tar", "--numeric-owner", "-C", dir, "--no-recursion", "--null", "--verbatim-files-from", "-T", "-", "-cf", "-"];
}

/** tar extracting a plain archive from stdin into `dir` (the agent decompresses and checks the stream first). */
export function tarExtractPlainArgv(dir: string): string[] {
  return ["tar", "--numeric-owner", "-p", "-C", dir, "-xf", "-"];
}

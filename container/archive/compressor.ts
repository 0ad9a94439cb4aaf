// The compressor (or decompressor) as its own child process, for pipelines where the agent must see the plain
// tar stream between tar and the compressor (single-pass manifests, in-stream restore checks). Same programs
// and flags as `tar -I` gets (tar-argv.ts), so an archive made either way decodes either way.
import { startTool, type RunningTool } from "../system/run-tool.ts";
import type { TarFormat } from "../contract/protocol.ts";
import { compressProgram, decompressProgram } from "./tar-argv.ts";

/** stdin → compressed stdout; undefined when the format is a plain tar. */
export function startCompressor(format: TarFormat): RunningTool | undefined {
  const program = compressProgram(format);
  return program ? startTool([...program.split(" "), "-c"], { stdin: "pipe" }) : undefined;
}

/** compressed stdin → tar stdout; undefined when the format is a plain tar. */
export function startDecompressor(format: TarFormat): RunningTool | undefined {
  const program = decompressProgram(format);
  return program ? startTool([...program.split(" "), "-c"], { stdin: "pipe" }) : undefined;
}

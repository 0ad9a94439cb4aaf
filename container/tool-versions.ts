// Writes this machine's tools' versions, each with the binary asked (container/system/probe.ts), to the file named
// on the command line: the image's build runs it once after installing the tools (Dockerfile), so that no
// sandbox's agent spawns ~15 processes on its first probe. Usage: bun tool-versions.js FILE
import { writeFile } from "node:fs/promises";
import { toolVersionsNow } from "./system/probe.ts";

const out = process.argv[2];
if (!out) {
  console.error("usage: tool-versions FILE");
  process.exit(2);
}
const found = await toolVersionsNow();
await writeFile(out, `${JSON.stringify(found, null, 1)}\n`);
console.log(`tool-versions: ${found.tools.length} tools written to ${out}`);

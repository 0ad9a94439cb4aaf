// Where snapflow-lazy (native/lazy: the chunker, chunk uploader and lazy FUSE file) is: on PATH, as the probe
// reports it (/usr/local/bin in the image; the local stack puts native/lazy/bin on the host agent's PATH).
import { AgentError } from "./agent-error.ts";
import { findOnPath } from "./find-on-path.ts";

export async function lazyTool(): Promise<string> {
  const bin = await findOnPath("snapflow-lazy");
  if (!bin) throw new AgentError("unavailable", "snapflow-lazy is not installed here (build it with native/lazy/build.sh; the image copies it to /usr/local/bin)");
  return bin;
}

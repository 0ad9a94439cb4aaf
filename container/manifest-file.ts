// Manifests as files: the single-pass archiver writes the manifest it made into the sandbox (the Worker copies it
// to the store after the archive), and a restore or incremental reads the expected or base manifest from a
// sandbox file or straight from the store over a presigned GET (so the Worker stays out of the byte path; a
// 30k-file manifest is about 5 MB of JSON).
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { AgentError } from "./agent-error.ts";
import { checkUrl } from "./presigned.ts";
import { ManifestSchema, type Manifest } from "./protocol.ts";

export type ManifestSource = { file: string } | { url: string };

/** Writes the manifest as JSON; answers its size in bytes. */
export async function writeManifest(file: string, manifest: Manifest): Promise<number> {
  const text = JSON.stringify(manifest);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, text);
  return Buffer.byteLength(text);
}

/** Reads and validates a manifest; `field` names the request field in errors. */
export async function loadManifest(source: ManifestSource, field: string): Promise<Manifest> {
  let text: string;
  if ("file" in source) {
    text = await readFile(source.file, "utf8").catch(() => {
      throw new AgentError("not_found", `${field}.file: no manifest file there`, `${field}.file`);
    });
  } else {
    const r = await fetch(checkUrl(source.url, `${field}.url`)).catch((e: Error) => {
      throw new AgentError("tool_failed", `${field}.url: GET failed: ${e.message}`);
    });
    if (!r.ok) throw new AgentError(r.status === 404 ? "not_found" : "tool_failed", `${field}.url: GET answered ${r.status}`, `${field}.url`);
    text = await r.text();
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AgentError("bad_request", `${field}: not a JSON manifest`, field);
  }
  const parsed = ManifestSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new AgentError("bad_request", `${field}: not a manifest (${issue.path.join(".")}: ${issue.message})`, field);
  }
  return parsed.data;
}

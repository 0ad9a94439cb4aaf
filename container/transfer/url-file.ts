// The URL files snapflow-lazy reads ({"<sha256>":"<presigned url>"}): presigned URLs are bearer credentials for one
// chunk each, so they travel in a file only this user can read, never on a command line (ps, logs), and the file is
// written whole (temporary file, rename) because the helper re-reads it after a 403.
import { randomUUID } from "node:crypto";
import { rename, rm, writeFile } from "node:fs/promises";

export async function writeUrlFile(file: string, urls: Record<string, string>): Promise<void> {
  const tmp = `${file}.${randomUUID()}.tmp`;
  try {
    await writeFile(tmp, JSON.stringify(urls), { mode: 0o600 });
    await rename(tmp, file);
  } finally {
    await rm(tmp, { force: true });
  }
}

// What reading a manifest costs the agent's CPU, streamed (manifest-stream.ts: cut, JSON.parse per chunk of entries,
// zod per entry) against whole (readFile, JSON.parse, zod per entry: the code before issue 21's streaming), on a
// synthetic manifest of N entries as a single-pass backup writes them (~314 bytes each), alternated.
// `node scripts/experiments/manifest-stream-read.ts [N] [RUNS]` (default 200000, 3).
import { createReadStream, createWriteStream, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { once } from "node:events";
import { manifestEntries } from "../../container/manifest/manifest-stream.ts";
import { ManifestEntry } from "../../container/contract/protocol.ts";

const n = Number(process.argv[2] ?? 200_000);
const runs = Number(process.argv[3] ?? 3);
const file = `/tmp/manifest-stream-read-${process.pid}.json`;
const out = createWriteStream(file);
out.write('{"version":1,"entries":[');
for (let i = 0; i < n; i++) {
  const d = `dir-${String(Math.floor(i / 1000)).padStart(4, "0")}`;
  const e = i % 1000 === 0
    ? { path: d, type: "dir", mode: 0o755, size: 0, mtime: 1764000000, uid: 1000, gid: 1000 }
    : { path: `${d}/node_modules-like-file-${String(i).padStart(7, "0")}.js`, type: "file", mode: 0o644, size: 1234, mtime: 1764000000, sha256: "9f".repeat(32), uid: 1000, gid: 1000, stat: { ino: String(1e9 + i), dev: "66306", mtimeNs: "1764000000123456789", ctimeNs: "1764000000123456789" } };
  if (!out.write((i ? "," : "") + JSON.stringify(e))) await once(out, "drain");
}
out.end('],"totals":{"files":0,"dirs":0,"symlinks":0,"bytes":0}}');
await once(out, "finish");

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
for (let r = 0; r < runs; r++) {
  let t = cpuMs();
  let count = 0;
  for await (const _ of manifestEntries(createReadStream(file, { highWaterMark: 256 * 1024 }), "bench")) count++;
  const streamed = cpuMs() - t;
  t = cpuMs();
  const whole = JSON.parse(readFileSync(file, "utf8")) as { entries: unknown[] };
  for (const e of whole.entries) ManifestEntry.parse(e);
  const read = cpuMs() - t;
  console.log(`${n} entries: streamed ${Math.round(streamed)} CPU-ms (${count} entries), whole ${Math.round(read)} CPU-ms`);
}
await rm(file, { force: true });

// snapflow-lazy's own unit tests (native/lazy: the chunk index, the fetcher, the lazy image and its prefetch order,
// the descriptor-relative merge, removal and opaque marking), run by `go test` so that `npm test` covers them too.
// Go is on every machine that builds the helper (npm install's postinstall does).
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { expect, it } from "vitest";

it("native/lazy's Go unit tests pass", () => {
  const r = spawnSync("go", ["test", "-count=1", "./..."], { cwd: join(import.meta.dirname, "../../native/lazy"), encoding: "utf8", env: { ...process.env, GOFLAGS: "-mod=readonly -trimpath -tags=netgo,osusergo" } }); // build.sh's flags: its cgo zstd is compiled once
  expect(r.error).toBeUndefined();
  expect(`${r.stdout}\n${r.stderr}`).not.toMatch(/^(FAIL|--- FAIL)/m);
  expect(r.status).toBe(0);
}, 240_000);

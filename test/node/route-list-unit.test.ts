// The contract lists every agent route with the schema of its body (container/contract/protocol.ts and the parts in
// protocol/); the route modules (container/routes/) serve them. The list is the reader's index, so it must not
// drift from what is served: every route listed is served, every route served is listed.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { allRoutes } from "../../container/routes/index.ts";

const CONTRACT = join(import.meta.dirname, "../../container/contract");

/** `//   VERB   /v1/path…` lines of the contract's comments, as "VERB /v1/path". */
function listedRoutes(): string[] {
  const files = [join(CONTRACT, "protocol.ts"), ...readdirSync(join(CONTRACT, "protocol")).map((f) => join(CONTRACT, "protocol", f))];
  const listed = new Set<string>();
  for (const file of files) {
    for (const m of readFileSync(file, "utf8").matchAll(/^\/\/\s+(GET|POST|PUT|DELETE)\s+(\/v1\/[a-z0-9/-]+)/gm)) listed.add(`${m[1]} ${m[2]}`);
  }
  return [...listed].sort();
}

it("the contract's route list names exactly the routes the agent serves", () => {
  // Health is answered by the server itself, before the route table (container/http/server.ts).
  const listed = listedRoutes().filter((r) => r !== "GET /v1/health");
  expect(listed).toEqual([...allRoutes().keys()].sort());
});

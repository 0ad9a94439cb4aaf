// How the agent reads the engine's pass when it fails (container/archive/engine-pass.ts settle): a disk that fills
// under the staged archive breaks the relay, and the engine, whose reader went away, answers "broken pipe" — which of
// the two comes first is a race (seen in a fresh-clone CI run under load). The relay's error is the cause, and the
// one answered (its ENOSPC makes the agent's 507 no_space); the engine's own failures still win otherwise.
import { expect, it } from "vitest";
import { settle } from "../../container/archive/engine-pass.ts";
import { isNoSpace } from "../../container/http/agent-error.ts";

const rejected = (reason: unknown): PromiseSettledResult<void> => ({ status: "rejected", reason });
const fulfilled = <T>(value: T): PromiseSettledResult<T> => ({ status: "fulfilled", value });
const enospc = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
const engineSaid = (code: string, message: string) => fulfilled(JSON.stringify({ error: { code, message } }));

it("a relay that failed is the cause of the engine's broken pipe, whichever was seen first", () => {
  const call = () => settle(rejected(new Error("exit 1")), rejected(enospc), engineSaid("tool_failed", "write /dev/stdout: broken pipe"), 1 << 20, 1, 0, false);
  expect(call).toThrow(/ENOSPC/);
  let thrown: unknown;
  try {
    call();
  } catch (e) {
    thrown = e;
  }
  expect(isNoSpace(thrown)).toBe(true);
});

it("the engine's own failure is answered when the relay did not fail, or failed for another reason than the engine's pipe", () => {
  expect(() => settle(rejected(new Error("exit 1")), fulfilled(undefined), engineSaid("bad_request", "path: a name that is not UTF-8"), 0, 1, 0, false)).toThrow(/not UTF-8/);
  expect(() => settle(rejected(new Error("exit 1")), rejected(enospc), engineSaid("tool_failed", "d/x: file changed as we read it"), 10, 1, 0, false)).toThrow(/file changed/);
  expect(() => settle(rejected(new Error("killed")), rejected(enospc), fulfilled(""), 10, null, 0, false)).toThrow(/ENOSPC/);
});

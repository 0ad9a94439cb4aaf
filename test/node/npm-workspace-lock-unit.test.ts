// The peers race installs bench/npm-workspace with `npm install` when `npm ci` refuses its lockfile; lockDrift says
// whether that install is still the committed one. npm adds other platforms' optional builds to the lockfile when
// the registry has them: not drift. A changed version or integrity, a package gone, a required one added: drift.
import { describe, expect, it } from "vitest";
import { lockDrift } from "../../scripts/bench/peers/npm-workspace.ts";

const lock = (packages: Record<string, object>) => Buffer.from(JSON.stringify({ lockfileVersion: 3, packages }));
const committed = lock({
  "": { name: "ws" },
  "node_modules/rollup": { version: "4.1.0", integrity: "sha512-a" },
  "node_modules/@rollup/rollup-linux-x64-gnu": { version: "4.1.0", integrity: "sha512-b", optional: true },
});

describe("lockDrift", () => {
  it("is empty when npm only added other platforms' optional builds", () => {
    const installed = lock({
      ...JSON.parse(committed.toString()).packages,
      "node_modules/@rollup/rollup-darwin-arm64": { version: "4.1.0", integrity: "sha512-c", optional: true },
    });
    expect(lockDrift(committed, installed)).toEqual([]);
  });

  it("names a changed version, a missing package and a required one added", () => {
    const installed = lock({
      "": { name: "ws" },
      "node_modules/rollup": { version: "4.2.0", integrity: "sha512-z" },
      "node_modules/left-pad": { version: "1.0.0", integrity: "sha512-d" },
    });
    expect(lockDrift(committed, installed)).toEqual(["node_modules/rollup 4.1.0 → 4.2.0", "node_modules/@rollup/rollup-linux-x64-gnu missing", "node_modules/left-pad added"]);
  });
});

// A fresh agent process's first probe (a wake's first step in a fresh sandbox), with and without the tools' versions
// the image asks at build (container/tool-versions.ts, container/system/probe.ts): RUNS fresh Bun processes each,
// alternated. Usage: node scripts/experiments/first-probe.ts [RUNS]
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PROJECT } from "../stack/stack.ts";

const runs = Number(process.argv[2] ?? 5);
const bun = join(PROJECT, "node_modules/.bin/bun");
const probe = join(PROJECT, "container/system/probe.ts");
const file = join(mkdtempSync(join(tmpdir(), "first-probe-")), "tool-versions.json");
execFileSync(bun, [join(PROJECT, "container/tool-versions.ts"), file], { stdio: "ignore" });
const once = (seeded: boolean) => Number(execFileSync(bun, ["-e", `
  const { probe, seedToolVersions } = await import(${JSON.stringify(probe)});
  ${seeded ? `await seedToolVersions(${JSON.stringify(file)});` : ""}
  const t = performance.now(); await probe("/tmp"); console.log(performance.now() - t);`], { encoding: "utf8" }).trim());
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[(xs.length - 1) >> 1]!;
const with_: number[] = [], without: number[] = [];
for (let i = 0; i < runs; i++) {
  without.push(once(false));
  with_.push(once(true));
}
console.log(`first probe of a fresh Bun process, ${runs} runs: without the image's versions ${without.map((x) => x.toFixed(0)).join(", ")} ms (median ${median(without).toFixed(0)}); with them ${with_.map((x) => x.toFixed(0)).join(", ")} ms (median ${median(with_).toFixed(0)})`);

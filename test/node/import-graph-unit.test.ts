// Arrows point down: worker.ts wires workflows/ and queues/, which are thin adapters over src/; src/ never imports
// them, and the agent (container/) never imports the Worker. This reads every import of every file and resolves it.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** The project-relative files a source file imports (relative specifiers only; packages are not arrows). */
export function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+["']([^"']+)["']/g)].map((m) => m[1]!);
  return specs.filter((s) => s.startsWith(".")).map((s) => relative(ROOT, resolve(ROOT, dirname(file), s)));
}

const arrowsInto = (from: string, into: string[]) =>
  sources(from).flatMap((f) => importsOf(f).filter((i) => into.some((d) => i.startsWith(d + "/"))).map((i) => `${f} → ${i}`));

describe("import graph", () => {
  it("reads imports (the check below would pass vacuously otherwise)", () => {
    expect(importsOf("worker.ts")).toContain("src/api/routes.ts");
    expect(importsOf("worker.ts")).toContain("queues/matrix-queue-consumer.ts");
  });

  it("no arrow from src/ into queues/ or workflows/", () => {
    expect(arrowsInto("src", ["queues", "workflows"])).toEqual([]);
  });

  it("no arrow from queues/ into workflows/ (consumers start Workflows through their bindings)", () => {
    expect(arrowsInto("queues", ["workflows"])).toEqual([]);
  });

  it("the agent imports nothing of the Worker's", () => {
    expect(arrowsInto("container", ["src", "workflows", "queues"])).toEqual([]);
  });
});

// Arrows point down: worker.ts wires workflows/ and queues/, which are thin adapters over src/; src/ never imports
// them, and the agent (container/) never imports the Worker. The Worker and the agent share one named contract,
// container/contract/ (schemas, the layout of a sandbox, tokens, limits): the Worker imports that and nothing else of
// the agent, and the contract imports nothing outside itself. No file imports itself back through a chain of
// imports. This reads every import of every file and resolves it.
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

  it("the Worker imports the agent's contract (container/contract/) and nothing else of the agent", () => {
    const worker = ["src", "workflows", "queues"].flatMap((d) => sources(d)).concat("worker.ts");
    const intoAgent = worker.flatMap((f) => importsOf(f).filter((i) => i.startsWith("container/")).map((i) => `${f} → ${i}`));
    expect(intoAgent.length).toBeGreaterThan(10); // the contract is used: the check below is not vacuous
    expect(intoAgent.filter((a) => !a.split(" → ")[1]!.startsWith("container/contract/"))).toEqual([]);
  });

  it("the contract imports nothing outside itself", () => {
    expect(sources("container/contract").flatMap((f) => importsOf(f).filter((i) => !i.startsWith("container/contract/")).map((i) => `${f} → ${i}`))).toEqual([]);
  });

  it("no import circles: no file reaches itself through the files it imports", () => {
    const files = ["src", "workflows", "queues", "container", "scripts"].flatMap((d) => sources(d)).concat("worker.ts");
    const graph = new Map(files.map((f) => [f, importsOf(f)]));
    const circles: string[] = [];
    // Depth-first, colouring files: grey while on the path, black once every file below is done.
    const colour = new Map<string, "grey" | "black">();
    const path: string[] = [];
    const visit = (f: string) => {
      colour.set(f, "grey");
      path.push(f);
      for (const next of graph.get(f) ?? []) {
        if (!graph.has(next)) continue;
        if (colour.get(next) === "grey") circles.push([...path.slice(path.indexOf(next)), next].join(" → "));
        else if (!colour.has(next)) visit(next);
      }
      path.pop();
      colour.set(f, "black");
    };
    for (const f of files) if (!colour.has(f)) visit(f);
    expect(circles).toEqual([]);
  });
});

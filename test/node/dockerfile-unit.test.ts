// The production image (Dockerfile) agrees with the code around it: the base image tag is the installed
// @cloudflare/sandbox version, every tool the agent's probe knows (TOOLS in container/contract/protocol.ts) is installed,
// the agent lands where src/sandbox/sdk-transport.ts starts it, it is bundled as the tests' Bun run bundles it, the
// tools' versions are asked once at build into the file the agent starts with, and the agent's port from
// wrangler.jsonc is exposed.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { TOOLS } from "../../container/contract/protocol.ts";
import { TOOL_VERSIONS_FILE } from "../../container/system/probe.ts";
import { BUN_BUILD_FLAGS } from "../../scripts/stack/agent-runtime.ts";

const repo = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const read = (path: string) => readFileSync(repo(path), "utf8");

/** Dockerfile instructions, with line continuations joined and comments dropped. */
function instructions(dockerfile: string): { op: string; args: string }[] {
  const lines = dockerfile.split("\n").filter((l) => !/^\s*#/.test(l));
  const joined = lines.join("\n").replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(" ") };
    });
}

/** JSONC → JSON: drops // and /* *\/ comments outside strings (a URL's "//" stays), and trailing commas. */
function parseJsonc(text: string): any {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      const start = i;
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
      out += text.slice(start, i + 1);
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
      out += "\n";
    } else if (c === "/" && text[i + 1] === "*") {
      i = text.indexOf("*/", i + 2) + 1;
    } else out += c;
  }
  return JSON.parse(out.replace(/,(\s*[}\]])/g, "$1"));
}

const dockerfile = instructions(read("Dockerfile"));

describe("Dockerfile", () => {
  it("every FROM of the sandbox base image uses the installed @cloudflare/sandbox version", () => {
    const installed = JSON.parse(read("node_modules/@cloudflare/sandbox/package.json")).version as string;
    const froms = dockerfile.filter((i) => i.op === "FROM").map((i) => i.args.split(/\s+/)[0]!);
    const sandboxFroms = froms.filter((image) => image.startsWith("docker.io/cloudflare/sandbox:"));
    expect(sandboxFroms.length).toBeGreaterThanOrEqual(1);
    // The final stage (the image that ships) is the sandbox image.
    expect(froms.at(-1)).toMatch(/^docker\.io\/cloudflare\/sandbox:/);
    for (const image of sandboxFroms) expect(image.slice("docker.io/cloudflare/sandbox:".length), image).toBe(installed);
  });

  it("apt-get installs the Debian package of every tool in TOOLS", () => {
    const runs = dockerfile.filter((i) => i.op === "RUN").map((i) => i.args);
    const installed = new Set<string>();
    for (const run of runs) {
      for (const command of run.split(/&&|;/)) {
        const m = command.match(/apt-get\s+install\s+(.*)$/);
        if (m) for (const word of m[1]!.trim().split(/\s+/)) if (!word.startsWith("-")) installed.add(word);
      }
    }
    expect(installed.size).toBeGreaterThan(0);
    const needed = [...new Set(Object.values(TOOLS).flatMap((t) => (t.pkg ? [t.pkg] : [])))];
    expect(needed.filter((pkg) => !installed.has(pkg))).toEqual([]);
  });

  it("every tool built from this repository (no Debian package) is copied onto the image's PATH", () => {
    const built = Object.entries(TOOLS).filter(([, t]) => t.pkg === null).map(([name]) => name);
    expect(built).toContain("snapflow-lazy");
    const copied = dockerfile.filter((i) => i.op === "COPY").map((i) => i.args.split(/\s+/).at(-1));
    for (const name of built) expect(copied, name).toContain(`/usr/local/bin/${name}`);
  });

  it("the agent is built, copied to the path sdk-transport starts, and that is the same file", () => {
    const command = read("src/sandbox/sdk-transport.ts").match(/const AGENT_COMMAND = "([^"]+)"/)?.[1];
    expect(command).toBeDefined();
    const started = command!.split(/\s+/).find((w) => w.endsWith(".js"));
    expect(started).toBe("/opt/snapflow/agent.js");

    const copy = dockerfile.find((i) => i.op === "COPY" && i.args.split(/\s+/).at(-1) === started);
    expect(copy, `a COPY to ${started}`).toBeDefined();
    // What is copied is what the build stage wrote.
    const source = copy!.args.split(/\s+/).filter((w) => !w.startsWith("--")).at(0);
    const build = dockerfile.find((i) => i.op === "RUN" && i.args.includes("bun build"));
    expect(build?.args).toContain("container/agent.ts");
    expect(build?.args).toContain(`--outfile=${source}`);
    expect(copy!.args).toMatch(/--from=agent-build\b/);
  });

  it("asks every tool its version once, after installing them, into the file the agent reads when it starts", () => {
    // After every tool is there: the Debian ones and the ones built here.
    const install = Math.max(dockerfile.findIndex((i) => i.op === "RUN" && i.args.includes("apt-get install")), dockerfile.findIndex((i) => i.op === "COPY" && i.args.endsWith("/usr/local/bin/snapflow-lazy")));
    const asked = dockerfile.findIndex((i) => i.op === "RUN" && /\bbun \/opt\/snapflow\/tool-versions\.js\b/.test(i.args));
    expect(asked, "a RUN of tool-versions.js").toBeGreaterThan(install);
    expect(dockerfile[asked]!.args.split(/\s+/).at(-1)).toBe(TOOL_VERSIONS_FILE);
    const copy = dockerfile.find((i) => i.op === "COPY" && i.args.split(/\s+/).at(-1) === "/opt/snapflow/tool-versions.js");
    expect(copy?.args).toMatch(/--from=agent-build \/build\/tool-versions\.js\b/);
    expect(dockerfile.some((i) => i.op === "RUN" && i.args.includes("bun build container/tool-versions.ts") && i.args.includes("--outfile=/build/tool-versions.js"))).toBe(true);
  });

  it("builds the agent exactly as npm run test:bun does (scripts/stack/agent-runtime.ts BUN_BUILD_FLAGS)", () => {
    const build = dockerfile.find((i) => i.op === "RUN" && i.args.includes("bun build"))!;
    const words = build.args.split(/\s+/);
    const flags = words.slice(words.indexOf("build") + 1).filter((w) => w.startsWith("--") && !w.startsWith("--outfile="));
    expect(flags).toEqual([...BUN_BUILD_FLAGS]);
    expect(words.slice(words.indexOf("build") + 1).filter((w) => !w.startsWith("--"))).toEqual(["container/agent.ts"]);
    // and against the packages the tests ran: bun install reads npm's lockfile when it is there
    const copied = dockerfile.filter((i) => i.op === "COPY" && !i.args.includes("--from")).flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(copied).toContain("package-lock.json");
  });

  it("EXPOSEs the default AGENT_PORT from wrangler.jsonc", () => {
    const wrangler = parseJsonc(read("wrangler.jsonc"));
    const port = wrangler.vars.AGENT_PORT as string;
    expect(port).toMatch(/^\d+$/);
    expect(wrangler.vars.S3_ENDPOINT).toMatch(/^https:\/\//); // the comment stripper left URLs alone
    const exposed = dockerfile.filter((i) => i.op === "EXPOSE").flatMap((i) => i.args.split(/\s+/).map((p) => p.replace(/\/tcp$/, "")));
    expect(exposed).toContain(port);
  });
});

// The results page as a person sees it: a private local stack (SeaweedFS, the host agent, wrangler dev), a small
// matrix started over the API, and Debian's Chromium driven by playwright-core watching /matrices/:id update from
// running to complete, with the summary table and the SVG chart. CI installs chromium (.ci/run); elsewhere the test
// says it is skipped and why.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { apiClient } from "../../scripts/cli/api-client.ts";
import { freePort, startStack, type Stack } from "../../scripts/stack/stack.ts";

const CHROMIUM = "/usr/bin/chromium";
const haveChromium = existsSync(CHROMIUM);

let stack: Stack | undefined;
let browser: Browser | undefined;
let dir: string;

beforeAll(async () => {
  if (!haveChromium) return;
  dir = mkdtempSync(join(tmpdir(), "snapflow-e2e-"));
  stack = await startStack({ port: await freePort(), privateDir: dir, log: () => {} });
  // The flags that keep Chromium off the network on this machine (see the env notes).
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

it.skipIf(!haveChromium)(`the results page updates while the matrix runs, then shows its table and chart (needs ${CHROMIUM})`, async () => {
  const api = apiClient(stack!.apiUrl, stack!.apiToken);
  const started = await api.call<{ id: string }>("POST", "/api/matrices", {
    name: "e2e", datasets: [{ name: "tricky", kind: "tricky", seed: 1 }], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe"], runs: 3, dropCaches: false,
  });
  const page = await browser!.newPage();
  const seen = new Set<string>();
  page.on("load", async () => seen.add((await page.locator("#status").getAttribute("data-status").catch(() => null)) ?? "?"));
  const link = await api.call<{ url: string }>("POST", `/api/matrices/${started.id}/link`, {});
  await page.goto(link.url);
  seen.add((await page.locator("#status").getAttribute("data-status")) ?? "?");
  // The page reloads itself every 2 s while the matrix runs.
  await page.waitForSelector('#status[data-status="complete"]', { timeout: 150_000 });
  expect([...seen]).toContain("running");
  expect(await page.locator("#status").innerText()).toMatch(/3 of 3 runs done, 0 failed — complete/);
  const cells = await page.locator("#summary tbody tr td").allInnerTexts();
  expect(cells.slice(0, 4)).toEqual(["tricky", "tar-zst-pipe", "presigned-tar-zst-pipe", "3"]);
  // Two stacked bars (backup, restore), a segment per phase with its median in a title, each bar labelled.
  const segments = await page.locator("#chart svg rect title").allTextContents();
  expect(segments.some((t) => /^backup \w+: median /.test(t))).toBe(true);
  expect(segments.some((t) => /^restore \w+: median /.test(t))).toBe(true);
  expect(await page.locator("#chart svg text", { hasText: / s$/ }).count()).toBe(2);
  await page.screenshot({ path: join(dir, "results-page.png"), fullPage: true });
}, 200_000);

// The results page as a person sees it: a private local stack (SeaweedFS, the host agent, wrangler dev), a small
// matrix started over the API, and Debian's Chromium driven by playwright-core watching /matrices/:id update from
// running to complete, with the summary table and the SVG chart. CI installs chromium (.ci/run); elsewhere the test
// says it is skipped and why.
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
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
  expect(segments.filter((t) => /^backup overhead: the rest of the wall clock's median /.test(t))).toHaveLength(1);
  expect(await page.locator("#chart svg text.value").allTextContents()).toEqual([
    expect.stringMatching(/^backup tar-zst-pipe · \d+\.\d\d s$/), expect.stringMatching(/^restore presigned-tar-zst-pipe · \d+\.\d\d s$/),
  ]);
  // A labelled seconds axis, and the bars drawn to its scale: each segment as wide as its median in the axis' units.
  expect(await page.locator("#chart svg text.axis-title").textContent()).toMatch(/^seconds/);
  const ticks = await page.locator("#chart svg text.tick").evaluateAll((ts) => ts.map((t) => ({ s: parseFloat(t.textContent!), x: Number(t.getAttribute("x")) })));
  expect(ticks.length).toBeGreaterThanOrEqual(2);
  expect(ticks[0]!.s).toBe(0);
  const pxPerS = (ticks[1]!.x - ticks[0]!.x) / ticks[1]!.s;
  const drawn = await page.locator("#chart svg rect:has(title)").evaluateAll((rs) => rs.map((r) => ({ w: Number(r.getAttribute("width")), s: parseFloat(/(?:median|the rest of the wall clock's median) ([\d.]+) s/.exec(r.textContent!)![1]!) })));
  expect(drawn.length).toBeGreaterThanOrEqual(2);
  for (const d of drawn) expect(Math.abs(d.w - d.s * pxPerS), JSON.stringify({ d, pxPerS })).toBeLessThan(0.006 * pxPerS + 0.1);
  // Each bar ends at the wall clock its label gives.
  const ends = await page.locator("#chart svg").evaluate((svg) => [...svg.querySelectorAll("text.value")].map((t) => {
    const bar = [...svg.querySelectorAll("rect:has(title)")].filter((r) => r.textContent!.startsWith(t.textContent!.split(" ")[0]!));
    return { label: parseFloat(t.textContent!.split(" · ")[1]!), end: Math.max(...bar.map((r) => Number(r.getAttribute("x")) + Number(r.getAttribute("width")))) };
  }));
  for (const e of ends) expect(Math.abs(e.end - (ticks[0]!.x + e.label * pxPerS)), JSON.stringify(e)).toBeLessThan(0.006 * pxPerS + 0.5);
  // The last tick is at or past the longest bar: nothing is drawn off the axis.
  const longest = await page.locator("#chart svg").evaluate((svg) => Math.max(...[...svg.querySelectorAll("rect:has(title), line")].map((e) => e.getBoundingClientRect().right)));
  const lastTick = await page.locator("#chart svg text.tick").last().evaluate((t) => t.getBoundingClientRect().right);
  expect(longest).toBeLessThanOrEqual(lastTick + 1);
  await page.screenshot({ path: join(dir, "results-page-1280.png"), fullPage: true });

  // On a phone (390 px wide, as a phone's browser lays it out): nothing wider than the screen; the chart scaled
  // to fit with its axis; the table scrolls in its own box.
  const phone = await browser!.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
  await phone.goto(link.url);
  await phone.waitForSelector('#status[data-status="complete"]');
  expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  const chart = (await phone.locator("#chart svg").boundingBox())!;
  expect(chart.x).toBeGreaterThanOrEqual(0);
  expect(chart.x + chart.width).toBeLessThanOrEqual(390);
  expect(await phone.locator("#chart svg text.tick").count()).toBe(ticks.length);
  const table = await phone.locator(".scroll").evaluate((d) => ({ box: d.clientWidth, content: d.scrollWidth }));
  expect(table.box).toBeLessThanOrEqual(390);
  await phone.screenshot({ path: join(dir, "results-page-390.png"), fullPage: true });
  if (process.env.SNAPFLOW_SCREENSHOTS) for (const w of ["1280", "390"]) copyFileSync(join(dir, `results-page-${w}.png`), join(process.env.SNAPFLOW_SCREENSHOTS, `results-page-${w}.png`));
  await phone.close();
}, 200_000);

// The SDK's restoreBackup takes only UUIDs (its Sandbox.UUID_REGEX): the id sdk-restore derives from a restore's id
// must be one, the same on every retry of that restore, and another for another restore.
import { expect, it } from "vitest";
import { sdkRestoreUuid } from "../../src/restore/sdk-plan.ts";

// @cloudflare/sandbox 0.12.10, dist/sandbox-*.js: static UUID_REGEX
const SDK_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

it("is a version-4 UUID the SDK accepts, stable per restore id, distinct across them", async () => {
  const a = await sdkRestoreUuid("rs-20261126120000-0a1b2c3d");
  expect(a).toMatch(SDK_UUID);
  expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(await sdkRestoreUuid("rs-20261126120000-0a1b2c3d")).toBe(a);
  expect(await sdkRestoreUuid("rs-20261126120000-0a1b2c3e")).not.toBe(a);
});

// The ports the stack gives processes that bind later (scripts/stack/ports.ts): never from the ephemeral range,
// where any outgoing connection may take them first.
import { describe, expect, it } from "vitest";
import { ephemeralStart, freePort, holdPort, portIsFree } from "../../scripts/stack/ports.ts";

describe("freePort", () => {
  it("picks free ports below the ephemeral range", async () => {
    const start = ephemeralStart();
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(start);
    }
    expect(await portIsFree(ports[0]!)).toBe(true);
  });

  it("keeps below a bound it is given", async () => {
    for (let i = 0; i < 20; i++) expect(await freePort(10_100)).toBeLessThan(10_100);
  });

  it("tells a held port from a free one", async () => {
    const port = await freePort();
    const server = await holdPort(port);
    try {
      expect(await portIsFree(port)).toBe(false);
      await expect(holdPort(port)).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await new Promise((r) => server.close(r));
    }
    expect(await portIsFree(port)).toBe(true);
  });
});

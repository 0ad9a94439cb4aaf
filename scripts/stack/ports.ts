// Ports for processes we start that bind a while after we pick the port (wrangler dev, weed, nginx).
//
// Not listen(0): the OS hands those out from the ephemeral range, the range every outgoing connection takes its local
// port from. With tests running in parallel, a port picked that way was taken by some fetch's socket before wrangler
// bound it ("Address already in use", seen once in a fresh-clone `npm test`). A port below the ephemeral range is
// only ever taken by a listener that asks for it by number; two pickers choosing the same one at random is what is
// left, and that is as rare as the range is wide.
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";

const LOWEST = 10_000;

/** The first port of the OS's ephemeral range (Linux: /proc/sys/net/ipv4/ip_local_port_range; 32768 elsewhere). */
export function ephemeralStart(): number {
  try {
    const first = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > LOWEST + 1000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether nothing listens on 127.0.0.1:port. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

/** Listens on 127.0.0.1:port, or rejects (EADDRINUSE). */
export function holdPort(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

/** A random port in [LOWEST, below) that is free now; `below` defaults to the start of the ephemeral range. */
export async function freePort(below = ephemeralStart()): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = LOWEST + Math.floor(Math.random() * (below - LOWEST));
    if (await portIsFree(port)) return port;
  }
  throw new Error(`no free port on 127.0.0.1 between ${LOWEST} and ${below}`);
}

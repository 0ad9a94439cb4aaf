// TESTS ONLY. Cloudflare KV accepts about one write per second to the same key and answers a faster one with
// 429 ("KV PUT failed: 429 Too Many Requests"); miniflare's local KV accepts every write. This wrapper is a
// stand-in for that control-plane limit, which cannot exist locally: it refuses, the way production does, a write
// (put or delete) to a key that took a write less than a second ago. A refused write does not count.
//
// It is switched on only by the test-only binding TEST_KV_ONE_WRITE_PER_SECOND (set by the "workers-kv-limit"
// test project in vitest.config.ts, never by wrangler.jsonc), so production code runs on the plain binding. The
// last accepted write per key is remembered in this isolate: writes from other isolates are not seen (on the local
// stack and in the test pool, the Worker, its Workflows and its consumers share one).
export const KV_WRITE_WINDOW_MS = 1000;

const lastWrite = new Map<string, number>();
let refused = 0;

/** How many writes the wrapper refused so far in this isolate (tests read it to show the limit was hit). */
export const refusedKvWrites = () => refused;

function admit(op: "PUT" | "DELETE", key: string): void {
  const now = Date.now();
  const last = lastWrite.get(key);
  if (last !== undefined && now - last < KV_WRITE_WINDOW_MS) {
    refused++;
    throw new Error(`KV ${op} failed: 429 Too Many Requests`);
  }
  lastWrite.set(key, now);
}

export function oneWritePerSecond(kv: KVNamespace): KVNamespace {
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "put") {
        // async: a refusal is a rejected promise, as the binding's is
        return async (key: string, ...rest: unknown[]) => {
          admit("PUT", key);
          return (target.put as (...a: unknown[]) => Promise<void>)(key, ...rest);
        };
      }
      if (prop === "delete") {
        return async (key: string) => {
          admit("DELETE", key);
          return target.delete(key);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The INDEX binding, wrapped when the test-only switch is on. */
export function indexKv(env: Env): KVNamespace {
  const on = (env as unknown as { TEST_KV_ONE_WRITE_PER_SECOND?: string }).TEST_KV_ONE_WRITE_PER_SECOND === "true";
  return on ? oneWritePerSecond(env.INDEX) : env.INDEX;
}

// A layered file-level index's chain in a request (contract/protocol/trees.ts IndexChain): each URL only on the
// store's origin, checked one by one, named by its place when it is not.
import type { Ctx } from "./route.ts";

export type Chain = { url: string; sha256: string }[];

/** `{ chain }` with every URL checked, or nothing when the request names no chain. */
export function checkedChain(c: Ctx, chain: Chain | undefined, field: string): { chain?: Chain } {
  if (!chain?.length) return {};
  return { chain: chain.map((o, i) => ({ url: c.storeUrl(o.url, `${field}.chain.${i}.url`), sha256: o.sha256 })) };
}

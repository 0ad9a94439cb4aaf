// Retention policies, one per (sandbox, path), in the store: policies/<sandboxId>/<sha256(path), 16 hex>.json
// (a path can be long and hold any character; its hash is a fixed, safe key, and the record keeps the path).
import { z } from "zod";
import type { ObjectStore } from "../store/object-store.ts";
import { listAll } from "../store/list-all.ts";
import type { Policy } from "./forget-plan.ts";
import { getJson, putJson } from "./records.ts";

const Count = z.number().int().min(0).max(10_000).optional();

/** The body of PUT /api/policies: at least one rule keeps something (to keep everything, delete the policy). */
export const KeepRulesBody = z.object({ keepLast: Count, keepDaily: Count, keepWeekly: Count }).strict()
  .refine((r) => (r.keepLast ?? 0) + (r.keepDaily ?? 0) + (r.keepWeekly ?? 0) > 0, {
    message: "a policy keeps something: give keepLast, keepDaily or keepWeekly above 0 (to keep everything, delete the policy)",
  });

export interface StoredPolicy extends Policy {
  updatedAt: string;
}

const POLICIES = "policies/";

async function pathHash(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(path));
  return [...new Uint8Array(digest).slice(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

export const policyKey = async (sandboxId: string, path: string) => `${POLICIES}${sandboxId}/${await pathHash(path)}.json`;

export async function putPolicy(store: ObjectStore, policy: StoredPolicy): Promise<void> {
  await putJson(store, await policyKey(policy.sandboxId, policy.path), policy);
}

export async function getPolicy(store: ObjectStore, sandboxId: string, path: string): Promise<StoredPolicy | null> {
  return getJson<StoredPolicy>(store, await policyKey(sandboxId, path));
}

export async function deletePolicy(store: ObjectStore, sandboxId: string, path: string): Promise<boolean> {
  const key = await policyKey(sandboxId, path);
  const had = (await store.head(key)) !== null;
  await store.delete(key);
  return had;
}

/** Every policy (of one sandbox, when given). */
export async function listPolicies(store: ObjectStore, sandboxId?: string): Promise<StoredPolicy[]> {
  const out: StoredPolicy[] = [];
  for await (const o of listAll(store, sandboxId ? `${POLICIES}${sandboxId}/` : POLICIES)) {
    const p = await getJson<StoredPolicy>(store, o.key);
    if (p) out.push(p);
  }
  return out;
}

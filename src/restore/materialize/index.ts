// Every materialization of an archive in the sandbox, by the registry's Materialize: a missing entry fails to
// compile. overlay is not one: it is a plan of its own (overlay-plan.ts), chosen once in restore-plan.ts.
import type { Materialize } from "../../strategies/registry.ts";
import { extractMaterialization } from "./extract.ts";
import { lazyMaterialization } from "./lazy.ts";
import type { Materialization } from "./materialization.ts";
import { mountMaterialization } from "./mount.ts";

export const MATERIALIZATIONS: Record<Exclude<Materialize, "overlay">, Materialization> = {
  extract: extractMaterialization,
  "mount-kernel": mountMaterialization("mount-kernel"),
  "mount-fuse": mountMaterialization("mount-fuse"),
  lazy: lazyMaterialization(false),
  "lazy-overlay": lazyMaterialization(true),
};

export type { Materialization } from "./materialization.ts";

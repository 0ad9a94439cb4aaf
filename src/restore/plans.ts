// The two restore plans (restore-plan.ts says what a plan is), and the one place a strategy chooses between them.
import type { RestoreStrategy } from "../strategies/registry.ts";
import { archivePlan } from "./archive-plan.ts";
import { overlayPlan } from "./overlay-plan.ts";
import type { RestorePlan } from "./restore-plan.ts";

export const planOf = (s: RestoreStrategy): RestorePlan => (s.materialize === "overlay" ? overlayPlan : archivePlan);

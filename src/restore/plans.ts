// The restore plans (restore-plan.ts says what a plan is), and the one place a strategy chooses between them: the
// SDK's own restore, the overlay, or an archive.
import type { RestoreStrategy } from "../strategies/registry.ts";
import { archivePlan } from "./archive-plan.ts";
import { overlayPlan } from "./overlay-plan.ts";
import type { RestorePlan } from "./restore-plan.ts";
import { sdkPlan } from "./sdk-plan.ts";

export const planOf = (s: RestoreStrategy): RestorePlan => (s.path === "sdk-restore" ? sdkPlan : s.materialize === "overlay" ? overlayPlan : archivePlan);

// The lifecycle cron's and the run watchdog's expressions, in a module of its own (no imports) so the local stack's start-up (Node) can
// fire the same trigger without pulling in the Worker's bindings.
export const LIFECYCLE_CRON = "17 * * * *";
/** The watchdog for interrupted runs (src/runs/interrupted-runs.ts): every five minutes, and once at the local stack's start. */
export const WATCHDOG_CRON = "*/5 * * * *";
/**
 * Not a cron expression: the name under which the local stack fires the watchdog once when it is up (scripts/stack/
 * stack.ts, through /cdn-cgi/handler/scheduled with time= the moment it came up). Runs older than that moment that
 * still say running were in flight when the stack stopped. No deployed trigger carries it.
 */
export const STACK_START_TRIGGER = "@stack-start";

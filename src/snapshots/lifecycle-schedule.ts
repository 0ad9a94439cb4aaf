// The lifecycle cron's expression, in a module of its own (no imports) so the local stack's start-up (Node) can
// fire the same trigger without pulling in the Worker's bindings.
export const LIFECYCLE_CRON = "17 * * * *";

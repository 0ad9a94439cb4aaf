// The Worker's entry: it only wires. HTTP goes to the API router; the Workflow classes and the Sandbox Durable
// Object are re-exported so wrangler can bind them.
import { ApiError, errorResponse, json } from "./api/http.ts";
import { handleApi } from "./api/routes.ts";
import { ConfigError } from "./config.ts";

export { Sandbox } from "@cloudflare/sandbox";
export { BackupWorkflow } from "../workflows/backup-workflow.ts";
export { RestoreWorkflow } from "../workflows/restore-workflow.ts";

export default {
  async fetch(request, env) {
    try {
      return await handleApi(request, env);
    } catch (e) {
      if (e instanceof ApiError) return errorResponse(e);
      if (e instanceof ConfigError) return json({ error: { message: e.message } }, 500);
      console.error("unhandled", e);
      return json({ error: { message: `internal error: ${(e as Error).message ?? String(e)}` } }, 500);
    }
  },
} satisfies ExportedHandler<Env>;

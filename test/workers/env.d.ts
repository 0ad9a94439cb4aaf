declare module "cloudflare:test" {
  interface ProvidedEnv extends Env {
    /** test/global-setup.ts smallDisk, as JSON */
    TEST_SMALL_DISK: string;
    /** the fault proxy in front of the store (test/fault-proxy.ts) */
    TEST_FAULT_PROXY: string;
    /** the fault proxy between the Worker and the agent (test/fault-proxy.ts); AGENT_URL points at it */
    TEST_AGENT_FAULT_PROXY: string;
    /** what runs the agent: "node" (the source) or "bun" (the production bundle); test/global-setup.ts */
    TEST_AGENT_RUNTIME: "node" | "bun";
  }
}

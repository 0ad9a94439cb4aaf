// Helpers for Worker tests: call the API through the Worker's own fetch handler, and talk to the real host agent
// directly (to prepare trees and read manifests independently of the code under test).
import { env, exports } from "cloudflare:workers";

export async function api(method: string, path: string, body?: unknown, token: string = env.API_TOKEN): Promise<{ status: number; json: any }> {
  const r = await exports.default.fetch(`http://snapflow.test${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

export async function agent(sandboxId: string, method: string, path: string, body?: unknown): Promise<any> {
  const r = await fetch(`${env.AGENT_URL}${path}`, {
    method,
    headers: { authorization: `Bearer ${env.AGENT_TOKEN}`, "x-snapflow-sandbox": sandboxId, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`agent ${method} ${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

let counter = 0;
/** A sandbox id no other test uses: every test gets fresh sandbox roots. */
export function freshSandbox(label: string): string {
  return `${label}-${Date.now().toString(36)}-${(counter++).toString(36)}`;
}

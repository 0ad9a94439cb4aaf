// Per-sandbox agent credentials. The Worker holds one AGENT_SECRET and never hands it to a sandbox: each sandbox's
// agent gets token = hex(HMAC-SHA256(AGENT_SECRET, sandboxId)), so a token read out of one sandbox (its agent's
// environment, a process listening on the agent's port) opens no other. A host agent serving many sandboxes (the
// local stack) holds the secret and checks each request's token against the sandbox header it came with.
// WebCrypto only: the Worker, the agent (Node or Bun) and the tests share this module.

const enc = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function keyFor(secret: string): Promise<CryptoKey> {
  let k = keys.get(secret);
  if (!k) keys.set(secret, (k = crypto.subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"])));
  return k;
}

/** The bearer token of the agent in sandbox `sandboxId`. */
export async function agentTokenFor(secret: string, sandboxId: string): Promise<string> {
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", await keyFor(secret), enc.encode(sandboxId)));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

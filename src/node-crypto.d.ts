// The part of workerd's node:crypto (nodejs_compat) that src/ uses: synchronous SHA-256 and HMAC, for signing many
// URLs at once (store/presign-many.ts). Declared here rather than taking @types/node, which would put Node's
// globals (Buffer, process) into the Worker's types.
declare module "node:crypto" {
  interface Digester {
    update(data: string | Uint8Array): Digester;
    digest(): Uint8Array;
    digest(encoding: "hex" | "base64"): string;
  }
  export function createHash(algorithm: "sha256"): Digester;
  export function createHmac(algorithm: "sha256", key: string | Uint8Array): Digester;
}

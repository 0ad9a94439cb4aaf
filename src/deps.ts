// What the phases need, built from the Worker's env: the object store, the sandbox transport, the index (KV),
// and the S3 settings the presigner uses. The choice of implementations is configuration (see config.ts).
import { readConfig, type Config } from "./config.ts";
import { localTransport } from "./sandbox/local-transport.ts";
import { sdkTransport } from "./sandbox/sdk-transport.ts";
import type { SandboxTransport } from "./sandbox/transport.ts";
import type { ObjectStore } from "./store/object-store.ts";
import { r2Store } from "./store/r2-store.ts";
import { s3Store, type S3Settings } from "./store/s3-store.ts";

export interface Deps {
  config: Config;
  store: ObjectStore;
  transport: SandboxTransport;
  kv: KVNamespace;
  s3: S3Settings;
}

export function depsFrom(env: Env): Deps {
  const config = readConfig(env);
  const s3: S3Settings = {
    endpoint: config.S3_ENDPOINT, bucket: config.S3_BUCKET, region: config.S3_REGION,
    accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY,
  };
  return {
    config,
    s3,
    kv: env.INDEX,
    store: config.OBJECT_STORE === "r2" ? r2Store(env.SNAPSHOTS) : s3Store(s3),
    transport: config.SANDBOX_TRANSPORT === "local"
      ? localTransport(config.AGENT_URL, config.AGENT_TOKEN)
      : sdkTransport(env.SANDBOX as never, config.AGENT_TOKEN, config.AGENT_PORT),
  };
}

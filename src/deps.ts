// What the phases need, built from the Worker's env: the object store, the presigner (URLs the sandbox uses to
// reach the same bucket), the sandbox transport and the index (KV). The choice of implementations is
// configuration (see config.ts).
import { readConfig, type Config } from "./config.ts";
import { agentDeadlinesFrom } from "./sandbox/agent-deadlines.ts";
import { localTransport } from "./sandbox/local-transport.ts";
import { sdkTransport } from "./sandbox/sdk-transport.ts";
import type { SandboxTransport } from "./sandbox/transport.ts";
import type { ObjectStore } from "./store/object-store.ts";
import { s3Presigner, type Presigner } from "./store/presigner.ts";
import { r2Store } from "./store/r2-store.ts";
import { s3Store, type S3Settings } from "./store/s3-store.ts";
import { indexKv } from "./testing/kv-write-limit.ts";

export interface Deps {
  config: Config;
  store: ObjectStore;
  presigner: Presigner;
  transport: SandboxTransport;
  kv: KVNamespace;
}

export function depsFrom(env: Env): Deps {
  const config = readConfig(env);
  const s3: S3Settings = {
    endpoint: config.S3_ENDPOINT, bucket: config.S3_BUCKET, region: config.S3_REGION,
    accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY,
  };
  const deadlines = agentDeadlinesFrom(config);
  return {
    config,
    presigner: s3Presigner(s3, config.PRESIGN_EXPIRY_SECONDS),
    // The plain binding, unless a test project switched on the one-write-per-second stand-in (testing/kv-write-limit.ts).
    kv: indexKv(env),
    store: config.OBJECT_STORE === "r2" ? r2Store(env.SNAPSHOTS) : s3Store(s3),
    transport: config.SANDBOX_TRANSPORT === "local"
      ? localTransport(config.AGENT_URL, config.AGENT_SECRET, deadlines)
      : sdkTransport(env.SANDBOX as never, config.AGENT_SECRET, config.AGENT_PORT, config.S3_ENDPOINT, deadlines),
  };
}

// A store reached through a proxy that drops one thing: nginx (Debian's nginx-light, a real proxy, none of our code)
// in front of the stack's object store, passing every request through unchanged (Host included, so SigV4 holds)
// except what its `hide` list removes from the answers — as a CDN or proxy that passes only the headers it knows
// would. startStack's storeFront puts it between the Worker, the agent and the store. Tests only.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../scripts/stack/stack.ts";

export const NGINX = "/usr/sbin/nginx";
export const haveNginx = existsSync(NGINX);

/** Starts nginx in `dir` in front of `storeEndpoint`, hiding the response headers named; resolves once it answers. */
export async function nginxStoreFront(dir: string, storeEndpoint: string, hide: string[]): Promise<{ endpoint: string; stop(): Promise<void> }> {
  mkdirSync(join(dir, "tmp"), { recursive: true });
  const port = await freePort();
  const upstream = new URL(storeEndpoint).host;
  writeFileSync(join(dir, "nginx.conf"), `
user root;
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_max_body_size 0;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://${upstream};
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Connection "";
      proxy_request_buffering off;
      proxy_buffering off;
${hide.map((h) => `      proxy_hide_header ${h};`).join("\n")}
    }
  }
}
`);
  const child = spawn(NGINX, ["-p", dir, "-c", join(dir, "nginx.conf")], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (b) => (stderr += b));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const endpoint = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 10_000; ; ) {
    if (child.exitCode !== null) throw new Error(`nginx exited during start-up: ${stderr}`);
    if (await fetch(`${endpoint}/healthz`).then((r) => r.ok, () => false)) break;
    if (Date.now() > deadline) throw new Error(`nginx did not answer at ${endpoint}: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    endpoint,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

// Every route the agent serves, gathered from the route modules (one per concern). A key served by two modules
// is refused when the server is built, so adding a route can never silently replace another.
import { adminRoutes } from "./admin.ts";
import { archiveRoutes } from "./archive.ts";
import { chunkRoutes } from "./chunks.ts";
import { fileRoutes } from "./files.ts";
import { filecasUnpackRoutes } from "./filecas-unpack.ts";
import { filecasCheckRoutes } from "./filecas-check.ts";
import { filecasPackRoutes } from "./filecas-pack.ts";
import { filecasMountRoutes } from "./filecas-mount.ts";
import { imageRoutes } from "./images.ts";
import type { Handler, Routes } from "./route.ts";
import { swapRoutes } from "./swaps.ts";
import { transferRoutes } from "./transfer.ts";
import { treeRoutes } from "./trees.ts";

const MODULES: Routes[] = [adminRoutes, treeRoutes, archiveRoutes, fileRoutes, transferRoutes, imageRoutes, chunkRoutes, swapRoutes, filecasUnpackRoutes, filecasCheckRoutes, filecasPackRoutes, filecasMountRoutes];

export function allRoutes(): Map<string, Handler> {
  const table = new Map<string, Handler>();
  for (const routes of MODULES) {
    for (const [key, handler] of Object.entries(routes)) {
      if (table.has(key)) throw new Error(`agent route ${key} is defined twice`);
      table.set(key, handler);
    }
  }
  return table;
}

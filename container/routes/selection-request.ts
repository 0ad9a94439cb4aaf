// The selection a backup's request carries (protocol.ts SELECTION_HEADER), compiled for the tree it names.
import { compileSelection, requestedSelectionSpec, type CompiledSelection } from "../archive/selection.ts";
import { SELECTION_HEADER } from "../contract/protocol.ts";
import type { Ctx } from "./route.ts";

export function requestedSelection(c: Ctx, dir: string): Promise<CompiledSelection | undefined> {
  return compileSelection(dir, requestedSelectionSpec(c.req.headers[SELECTION_HEADER]), { ceiling: ceilingOf(c) });
}

/** A host agent's sandbox root, where git must stop looking for a repository; none inside a sandbox ("/"). */
export function ceilingOf(c: Ctx): string | undefined {
  return c.root.hostRoot === "/" ? undefined : c.root.hostRoot;
}

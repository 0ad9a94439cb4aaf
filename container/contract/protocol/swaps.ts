// A restore's swap of the new tree into the target (tree-swap.ts).
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { ImageFormat, SquashfsFormat } from "./formats.ts";
import { ClearBody } from "./images.ts";

/** A restore's swap (tree-swap.ts): the target it restores into and the restore's id, which names its journal and trees. */
export const SwapBody = z.object({
  target: z.string(),
  id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "a restore id is 1–128 of A-Z, a-z, 0-9, '.', '_' and '-'"),
});

/**
 * A tree the swap lays at the target itself, right after it: the image from a lazy mount whose helper still serves
 * (LazyRemountBody without its path), an overlay over a lower that must still be mounted (OverlayBody with
 * `lowerMounted`), or a whole image file already checked against its record (MaterializeBody's mount, without its
 * path). One call instead of two on the way to usable.
 */
export const SwapMount = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("lazy-image"), work: z.string(), format: SquashfsFormat }).strict(),
  z.object({ kind: z.literal("overlay"), lower: z.string(), upper: z.string(), how: z.enum(["kernel", "fuse"]) }).strict(),
  z.object({ kind: z.literal("image"), archive: z.string(), format: ImageFormat, how: z.enum(["mount-kernel", "mount-fuse"]) }).strict(),
]);

/**
 * `mount`: nothing is built beside the target, because the tree is a mount: an empty directory goes in for it, and
 * the agent mounts it at the target. What it mounts over must still be there (an agent restart takes it): else a
 * 404 naming `mount.work` or `mount.lower`, with the swap done (repeating the call repeats only the mount).
 */
/** `clear`: what an earlier attempt may have left, cleared first as POST /v1/clear would (a round trip fewer). */
export const SwapInBody = SwapBody.extend({ mount: SwapMount.optional(), clear: ClearBody.optional() });

/** A swap's journal (tree-swap.ts): how far the swap of a restore's new tree into its target got. */
export type SwapState = "staging" | "swapping" | "swapped" | "committed";

export interface SwapJournal {
  id: string;
  /** sandbox paths */
  target: string;
  staged: string;
  old: string;
  state: SwapState;
  /** recorded before the first rename: whether there was a tree at the target to keep */
  hadTarget?: boolean;
  /** sandbox paths of snapflow mounts taken down at the target when the new tree went in */
  unmounted?: string[];
  startedAt: string;
  updatedAt: string;
}

// What a restore brings back, per property of a tree: the fidelity table of docs/strategies-and-fidelity.md as
// data. Each strategy in the registry (registry.ts) carries what it cannot keep; a pair (the snapshot's format ×
// the restore) keeps everything that neither its format nor its restore loses, and refuses what every backup
// refuses. GET /api/strategies shows each strategy's entries; the restore's verify step reads `sparse` from here
// (a materialization that cannot show holes is not asked to); test/workers/presets-integration.test.ts measures
// every pair with an independent walk and asserts exactly these outcomes.
import type { ArchiveFormat } from "../../container/contract/protocol.ts";

/** The properties the table follows (owners and set-id bits: restored with keepOwnership). */
export const FIDELITY_PROPERTIES = [
  "hard-links", "sparse", "owners", "setid", "xattrs", "acls", "capabilities", "ns-mtime", "empty-dirs", "fifos", "sockets", "long-names", "non-utf8-names",
] as const;
export type FidelityProperty = (typeof FIDELITY_PROPERTIES)[number];

export type Outcome = "kept" | "lost" | "refused";
/** Not kept: lost (the restore completes without it, and says so here) or refused (the backup fails with `code`). */
export interface NotKept {
  outcome: Exclude<Outcome, "kept">;
  why: string;
  /** refused: the error code the backup fails with */
  code?: string;
}
export type Fidelity = Partial<Record<FidelityProperty, NotKept>>;

/** What no strategy keeps, and why. Every backup walks the tree the same way and archives or images it plainly. */
export const EVERY_STRATEGY: Fidelity = {
  xattrs: { outcome: "lost", why: "extended attributes are not carried: tar runs without --xattrs and the images are built without them (-no-xattrs, -x-1), so nothing a sandbox set can reach another" },
  acls: { outcome: "lost", why: "POSIX ACLs are xattrs (system.posix_acl_*): not carried; the mode's group bits keep the ACL mask" },
  capabilities: { outcome: "lost", why: "file capabilities are an xattr (security.capability): not carried, as set-id bits are not without keepOwnership" },
  sockets: { outcome: "lost", why: "a socket is a live endpoint, not content: tar cannot archive one, and the walk leaves them out of every manifest" },
  "non-utf8-names": { outcome: "refused", code: "bad_request", why: "manifests, tar's list and the API name entries in UTF-8: a backup of a tree holding another name fails naming its directory rather than leave the file out" },
};

/** What a format loses whatever restores it. */
export function formatFidelity(format: ArchiveFormat): Fidelity {
  if (format.kind === "squashfs") return { "ns-mtime": { outcome: "lost", why: "squashfs keeps whole seconds" } };
  const out: Fidelity = {};
  if (format.kind === "erofs") {
    out["long-names"] = { outcome: "refused", code: "bad_request", why: "mkfs.erofs 1.5 fails on a 255-byte name (254 work): the backup refuses such a tree naming the entry" };
  }
  if (format.kind === "erofs" && format.compression === "none") {
    out.sparse = { outcome: "lost", why: "an uncompressed erofs image stores zero chunks once (--chunksize=4096) but its inodes report every block allocated, so neither its mount nor its extract shows holes" };
  }
  return out;
}

/** What a restore loses, by what it reads and how it materializes the tree. */
export function restoreFidelity(format: ArchiveFormat, materialize: string): Fidelity {
  const out: Fidelity = {};
  if (materialize === "mount-fuse" || (materialize === "overlay" && format.kind === "squashfs" && !format.chunks)) {
    out.sparse = { outcome: "lost", why: "squashfuse reports every block of a file as allocated, holes included (the image keeps them; the mount does not show them)" };
  }
  if (format.kind === "erofs" && materialize === "extract") {
    out.sparse = { outcome: "lost", why: "fsck.erofs --extract (erofs-utils 1.5) writes holes as zeros" };
  }
  return out;
}

/** A pair: what the snapshot's format or the restore does not keep, and what every strategy does not. */
export function pairFidelity(format: ArchiveFormat, restore: { fidelity: Fidelity }): Fidelity {
  return { ...EVERY_STRATEGY, ...formatFidelity(format), ...restore.fidelity };
}

/** Each property's outcome for a pair. */
export function outcomes(f: Fidelity): Record<FidelityProperty, Outcome> {
  return Object.fromEntries(FIDELITY_PROPERTIES.map((p) => [p, f[p]?.outcome ?? "kept"])) as Record<FidelityProperty, Outcome>;
}

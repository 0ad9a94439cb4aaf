// Listing snapshots from the KV index, filtered and paged. KV lists keys in order (snapshot:<id>, and ids start
// with their creation time to the second, so oldest first, ties in random order) with each key's metadata — the summary — so a page of up to 1000
// snapshots costs one KV list, not a read per snapshot. Filters apply to the summaries; a page holds up to
// `limit` matches, and its cursor says where the next page resumes: the KV cursor of the page being read and how
// many of its keys were already looked at (a KV cursor alone could only resume at a KV page's start).
import { z } from "zod";
import { SANDBOX_ID, SandboxPath } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import { KV_KEYS } from "../kv-keys.ts";
import type { SnapshotSummary } from "./records.ts";
import { Duration, parseLabelFilter } from "./snapshot-meta.ts";

const KV_PAGE = 1000;
/** KV pages read per request at most, so a filter that matches little cannot scan the whole index in one call. */
const MAX_KV_PAGES = 10;

export interface SnapshotFilter {
  sandboxId?: string;
  path?: string;
  name?: string;
  labels?: { key: string; value?: string }[];
  /** epoch ms, inclusive */
  since?: number;
  /** epoch ms, exclusive */
  until?: number;
}

/** A point in time as the query gives it: an ISO date or date-time, or a duration meaning that long ago ("3d"). */
const TimeParam = z.string().transform((s, ctx) => {
  const ago = Duration.safeParse(/^\d+$/.test(s) ? Number(s) : s);
  if (ago.success) return Date.now() - ago.data * 1000;
  const t = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2})?)?$/.test(s) ? Date.parse(s) : NaN;
  if (Number.isNaN(t)) {
    ctx.addIssue({ code: "custom", message: `'${s}' is neither an ISO date (2026-11-22, 2026-11-22T10:00:00Z) nor a duration ago (90m, 3d)` });
    return z.NEVER;
  }
  return t;
});

const ListQuery = z.object({
  sandboxId: SANDBOX_ID.optional(),
  path: SandboxPath.optional(),
  name: z.string().max(64).optional(),
  since: TimeParam.optional(),
  until: TimeParam.optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().max(2048).optional(),
}).strict();

/** Reads ?sandboxId=&path=&label=k=v&label=…&since=&until=&name=&limit=&cursor= ; a bad parameter is a 400 naming it. */
export function parseListQuery(params: URLSearchParams): { filter: SnapshotFilter; limit: number; cursor?: string } {
  const labels = params.getAll("label").map((text) => {
    const f = parseLabelFilter(text);
    if (!f) throw new SnapflowError("bad_request", `label: '${text}' is not key=value (or key) with a valid label key and value`, { field: "label" });
    return f;
  });
  const rest = Object.fromEntries([...params].filter(([k]) => k !== "label"));
  const r = ListQuery.safeParse(rest);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const field = issue.path.join(".") || String((issue as { keys?: string[] }).keys?.[0] ?? "query");
    throw new SnapflowError("bad_request", `${field}: ${issue.message}`, { field });
  }
  const { limit, cursor, ...filter } = r.data;
  return { filter: { ...filter, ...(labels.length ? { labels } : {}) }, limit, cursor };
}

export function matches(s: SnapshotSummary, f: SnapshotFilter): boolean {
  if (f.sandboxId !== undefined && s.source.sandboxId !== f.sandboxId) return false;
  if (f.path !== undefined && s.source.path !== f.path) return false;
  if (f.name !== undefined && s.name !== f.name) return false;
  const t = Date.parse(s.createdAt);
  if (f.since !== undefined && t < f.since) return false;
  if (f.until !== undefined && t >= f.until) return false;
  return (f.labels ?? []).every(({ key, value }) => s.labels?.[key] !== undefined && (value === undefined || s.labels[key] === value));
}

interface Position {
  /** the KV cursor of the page being read (none: the first page) */
  c?: string;
  /** keys of that page already looked at */
  s: number;
}

const encodeCursor = (p: Position) => btoa(JSON.stringify(p)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");

function decodeCursor(text: string | undefined): Position {
  if (!text) return { s: 0 };
  try {
    const p = JSON.parse(atob(text.replaceAll("-", "+").replaceAll("_", "/"))) as Position;
    if (Number.isInteger(p.s) && p.s >= 0 && (p.c === undefined || typeof p.c === "string")) return p;
  } catch {
    // fall through
  }
  throw new SnapflowError("bad_request", "cursor: not a cursor this API returned", { field: "cursor" });
}

/** A key's summary: from its metadata, or from its value when the summary was too long for metadata. */
async function summaryOf(kv: KVNamespace, key: { name: string; metadata?: unknown }): Promise<SnapshotSummary | null> {
  const m = key.metadata as (SnapshotSummary & { inValue?: boolean }) | undefined;
  if (m && !m.inValue) return m;
  return kv.get<SnapshotSummary>(key.name, "json");
}

export async function listSnapshots(kv: KVNamespace, filter: SnapshotFilter = {}, page: { limit?: number; cursor?: string } = {}): Promise<{ snapshots: SnapshotSummary[]; cursor?: string }> {
  const limit = page.limit ?? 100;
  let at = decodeCursor(page.cursor);
  const found: SnapshotSummary[] = [];
  for (let pages = 0; pages < MAX_KV_PAGES; pages++) {
    const r = await kv.list({ prefix: KV_KEYS.snapshotPrefix, cursor: at.c, limit: KV_PAGE });
    for (let i = at.s; i < r.keys.length; i++) {
      const s = await summaryOf(kv, r.keys[i]!);
      if (!s || !matches(s, filter)) continue;
      found.push(s);
      if (found.length === limit) {
        const next: Position | null = i + 1 < r.keys.length ? { c: at.c, s: i + 1 } : r.list_complete ? null : { c: r.cursor, s: 0 };
        return { snapshots: found, ...(next ? { cursor: encodeCursor(next) } : {}) };
      }
    }
    if (r.list_complete) return { snapshots: found };
    at = { c: r.cursor, s: 0 };
  }
  return { snapshots: found, cursor: encodeCursor(at) };
}

/** Every summary in the index (retention and the consistency check read them all). */
export async function allSnapshots(kv: KVNamespace): Promise<SnapshotSummary[]> {
  const all: SnapshotSummary[] = [];
  let cursor: string | undefined;
  do {
    const r = await listSnapshots(kv, {}, { limit: 1000, cursor });
    all.push(...r.snapshots);
    cursor = r.cursor;
  } while (cursor);
  return all;
}

// Ids snapflow makes: sortable by time, unique enough, and valid as Workflow instance ids.

/** A run id: `<prefix>-<yyyymmddhhmmss>-<8 hex>`, e.g. bk-20261122151947-111e0366. */
export function newId(prefix: string): string {
  const t = new Date().toISOString().replace(/[-:TZ.]/g, "").slice(0, 14);
  const r = [...crypto.getRandomValues(new Uint8Array(4))].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${prefix}-${t}-${r}`;
}

/** A matrix id: a valid prefix for the Workflow instance ids of its runs. */
export const newMatrixId = () => newId("mx");

// What the CLI prints when the API refuses a request: one line, in the CLI's own words. The API names the fields
// of its JSON body (`replace`, `sandboxId`: "pass replace: true"); the person at the command line typed flags, so
// every field the CLI has a flag for is named by that flag ("pass --replace"). Pure: the Worker tests feed it the
// API's real answers.

/** The API's body field → the CLI flag that sets it (backup and restore). */
export const FLAG_OF_FIELD: Readonly<Record<string, string>> = {
  sandboxId: "--sandbox",
  path: "--path",
  strategy: "--strategy",
  snapshotId: "--snapshot",
  baseSnapshotId: "--base",
  replace: "--replace",
  keepOwnership: "--keep-ownership",
  name: "--name",
  labels: "--label",
  ttl: "--ttl",
  excludes: "--exclude",
  gitignore: "--gitignore",
  excludeCaches: "--exclude-caches",
};

/** The flag for an API field (`labels.k` → the flag of `labels`), if the CLI has one. */
const flagOf = (field: string): string | undefined => FLAG_OF_FIELD[field] ?? FLAG_OF_FIELD[field.split(".")[0]!];

/** A message of the API's on one line, the fields it names at its start or as "field: true" turned into flags. */
export function inFlagWords(text: string): string {
  let message = text.replace(/\s+/g, " ").trim();
  for (const [field, flag] of Object.entries(FLAG_OF_FIELD)) {
    // "pass replace: true" → "pass --replace"; a message that opens with "sandboxId: …" → "--sandbox: …"
    message = message.replaceAll(`${field}: true`, flag).replace(new RegExp(`^${field}(?:\\.[^:\\s]*)?:`), `${flag}:`);
  }
  return message;
}

/** `snapflow <command>: <message>`, fields named by their flags; a field with no flag is named as the API's. */
export function apiErrorLine(command: string, error: { message: string; field?: string }): string {
  const message = inFlagWords(error.message);
  const flag = error.field === undefined ? undefined : flagOf(error.field);
  // A run's or snapshot's `id` is what the person typed after the command, and the message names it already.
  const named = flag ? (message.includes(flag) ? "" : ` (${flag})`) : error.field && error.field !== "id" ? ` (field ${error.field})` : "";
  return `snapflow ${command}: ${message}${named}`;
}

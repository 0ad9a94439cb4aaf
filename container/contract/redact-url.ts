// A presigned URL is a credential until it expires: its query string carries the signature. Error messages are
// persisted (run records, logs, the API's answers), so every URL in one loses its query string first. Pure, no
// imports: the agent's and the Worker's error classes both use it.

const URL_WITH_QUERY = /\b(https?:\/\/[^\s?#"'<>]+)\?[^\s"'<>]*/g;

/** `text` with each http(s) URL's query string replaced by "?<redacted>". */
export function redactUrls(text: string): string {
  return text.replace(URL_WITH_QUERY, "$1?<redacted>");
}

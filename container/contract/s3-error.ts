// An S3 error response in one line, for messages on both sides (the agent's presigned transfers and the
// Worker's S3 store): "HTTP 403 AccessDenied: Access Denied". Pure: the caller has already read the body.

/** The status, S3's <Code> and <Message> from an XML error body; without a <Code>, the start of the body. */
export function describeS3Error(status: number | undefined, body: string): string {
  const code = body.match(/<Code>([^<]+)<\/Code>/)?.[1];
  const message = body.match(/<Message>([^<]+)<\/Message>/)?.[1];
  const detail = message ? `: ${message}` : body.trim() && !code ? `: ${body.trim().slice(0, 300)}` : "";
  return `HTTP ${status}${code ? ` ${code}` : ""}${detail}`;
}

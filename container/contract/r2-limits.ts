// R2's multipart rules, in one place for both sides: the Worker's streaming multipart upload
// (src/store/multipart-upload.ts) and the agent's presigned one (protocol.ts validates part size and URL count
// with them). Every part but the last ≥ 5 MiB, each ≤ 5 GiB, at most 10,000 parts. No local S3 server enforces
// them, so we do.
export const R2_MULTIPART = { minPartBytes: 5 * 2 ** 20, maxPartBytes: 5 * 2 ** 30, maxParts: 10_000 } as const;

// The SHA-256 checksum S3 keeps for an object made by a multipart upload opened with
// x-amz-checksum-algorithm: SHA256 (checksum type COMPOSITE): SHA-256 over the parts' binary SHA-256 digests
// concatenated in part order, base64, then "-" and the part count. The store checks each part's hash at
// completion; HeadObject with x-amz-checksum-mode: ENABLED reports the composite. SeaweedFS 4.48 reports exactly
// this in CompleteMultipartUpload's answer and in HeadObject (store-checksum-integration checks it); R2 documents
// SHA-256 checksums as COMPOSITE only. Pure: Web Crypto, so the Worker and tests compute it alike.

/** The composite checksum of parts whose SHA-256 digests (hex) are given in part order. */
export async function compositeSha256(partsHex: string[]): Promise<string> {
  const joined = new Uint8Array(partsHex.length * 32);
  partsHex.forEach((hex, i) => {
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`part ${i + 1}: not a SHA-256 in hex: ${hex.slice(0, 80)}`);
    for (let b = 0; b < 32; b++) joined[i * 32 + b] = parseInt(hex.slice(b * 2, b * 2 + 2), 16);
  });
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", joined));
  return `${btoa(String.fromCharCode(...digest))}-${partsHex.length}`;
}

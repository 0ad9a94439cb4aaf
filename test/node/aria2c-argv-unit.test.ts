// A presigned URL is a credential: aria2c gets it on stdin, never in argv (readable by every process in the
// sandbox through /proc/<pid>/cmdline). The real tool reading that input is presigned-transfer-integration's
// aria2c test, which also watches /proc while it runs.
import { describe, expect, it } from "vitest";
import { aria2cArgv, aria2cInput } from "../../container/transfer/aria2c-argv.ts";

const signed = "http://127.0.0.1:8333/bucket/snapshots/bk-1/archive.tar.zst?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=deadbeef";

describe("aria2c", () => {
  it("argv names no URL and reads its input from stdin", () => {
    const argv = aria2cArgv(4, 2);
    expect(argv.join(" ")).not.toMatch(/https?:|Signature/);
    expect(argv.slice(-2)).toEqual(["-i", "-"]);
    expect(argv).toEqual(expect.arrayContaining(["-x", "4", "-s", "4", "--max-tries=3"]));
  });

  it("the input carries the URL with the output's directory and name as its options", () => {
    expect(aria2cInput(signed, "/s/snapflow/staging", "a.tar.zst")).toBe(`${signed}\n  dir=/s/snapflow/staging\n  out=a.tar.zst\n`);
  });

  it("refuses a line break that would smuggle another download or option into the input", () => {
    expect(() => aria2cInput(`${signed}\nhttp://elsewhere/`, "/d", "n")).toThrow(/line break/);
    expect(() => aria2cInput(signed, "/d", "n\n  dir=/etc")).toThrow(/line break/);
  });
});

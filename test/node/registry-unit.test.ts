// The strategy registry as data: typed lookups, the duplicate-name guard, and the dispatch tables the phases use
// (every path and materialization a preset names has a module).
import { describe, expect, it } from "vitest";
import { BACKUP_TRANSFERS } from "../../src/backup/transfer/index.ts";
import { MATERIALIZATIONS } from "../../src/restore/materialize/index.ts";
import { RESTORE_TRANSFERS } from "../../src/restore/transfer/index.ts";
import { extensionOf } from "../../container/contract/protocol.ts";
import { FIDELITY_PROPERTIES, outcomes, pairFidelity } from "../../src/strategies/fidelity.ts";
import { checkUniqueNames, findBackup, isImage, findRestore, restoresFor, restoresForSnapshot, STRATEGIES, type Strategy } from "../../src/strategies/registry.ts";

describe("typed lookups", () => {
  it("findBackup finds backup presets only, findRestore restore presets only", () => {
    expect(findBackup("tar-zst-pipe")?.path).toBe("multipart");
    expect(findBackup("presigned-tar-zst-pipe")).toBeUndefined();
    expect(findRestore("presigned-tar-zst-pipe")?.path).toBe("presigned-pipe");
    expect(findRestore("tar-zst-pipe")).toBeUndefined();
    expect(findBackup("no-such-preset")).toBeUndefined();
  });

  it("every restore names its materialization; tar archives are always extracted", () => {
    for (const s of STRATEGIES) {
      if (s.kind !== "restore") continue;
      expect(s.materialize, s.name).toBeDefined();
      if (s.format.kind === "tar") expect(s.materialize, s.name).toBe("extract");
    }
    expect(findRestore("presigned-squashfs-mount")?.materialize).toBe("mount-kernel");
    expect(findRestore("overlay-restore")?.materialize).toBe("overlay");
  });

  it("aria2c presets need aria2c besides their format's tools", () => {
    expect(findRestore("presigned-tar-zst-aria2c")?.requires).toEqual(["aria2c", "tar", "zstd", "snapflow-lazy"]);
    expect(findRestore("presigned-squashfs-mount-aria2c")?.requires).toEqual(["aria2c"]);
  });
});

describe("names", () => {
  it("the registry has no two entries of one name", () => {
    expect(new Set(STRATEGIES.map((s) => s.name)).size).toBe(STRATEGIES.length);
  });

  it("checkUniqueNames refuses a duplicate, naming it", () => {
    const dup = [...STRATEGIES, { ...STRATEGIES[0]! }] as Strategy[];
    expect(() => checkUniqueNames(dup)).toThrow(`the name ${STRATEGIES[0]!.name} is used twice`);
    expect(() => checkUniqueNames(STRATEGIES)).not.toThrow();
  });
});

describe("dispatch tables", () => {
  it("every backup preset's path has a transfer module; image formats are never on a streaming path", () => {
    for (const s of STRATEGIES) {
      if (s.kind !== "backup") continue;
      const t = BACKUP_TRANSFERS[s.path];
      expect(t, s.name).toBeDefined();
      // mksquashfs and mkfs.erofs cannot write to a pipe; the SDK's backup makes its image in its own step (the file-level format is made in one pass, as tar)
      if (isImage(s.format) && s.path !== "sdk-backup") expect(t.streamsArchive, s.name).toBe(false);
    }
  });

  it("every restore preset's path has a transfer module and its materialization a module (overlay is a plan)", () => {
    for (const s of STRATEGIES) {
      if (s.kind !== "restore") continue;
      expect(RESTORE_TRANSFERS[s.path], s.name).toBeDefined();
      if (s.materialize !== "overlay") expect(MATERIALIZATIONS[s.materialize], s.name).toBeDefined();
      // Images land in a file; only tar is piped into an extractor.
      if (s.format.kind !== "tar") expect(RESTORE_TRANSFERS[s.path].piped, s.name).toBe(false);
    }
  });

  it("a delta snapshot is restored by piped strategies only, an overlay delta by the overlay restore that mounts its base", () => {
    const zstd = findBackup("tar-zst-pipe")!.format;
    expect(restoresForSnapshot({ format: zstd, delta: { kind: "changed-files" } }).every((s) => RESTORE_TRANSFERS[s.path].piped)).toBe(true);
    expect(restoresForSnapshot({ format: zstd, delta: { kind: "overlay-upper" } }).map((s) => s.name)).toEqual(["overlay-restore", "lazy-overlay-restore", "files-overlay-restore"]);
    // By the base: a whole squashfs image is downloaded and mounted, a chunked one mounted lazily.
    expect(restoresForSnapshot({ format: zstd, delta: { kind: "overlay-upper" } }, findBackup("squashfs-zstd")!.format).map((s) => s.name)).toEqual(["overlay-restore"]);
    expect(restoresForSnapshot({ format: zstd, delta: { kind: "overlay-upper" } }, findBackup("squashfs-chunked")!.format).map((s) => s.name)).toEqual(["lazy-overlay-restore"]);
    // A file-level base: its index served lazily (files-mount) under the chain; a plain file-level snapshot is still
    // restored by files-extract unless another is named.
    expect(restoresForSnapshot({ format: zstd, delta: { kind: "overlay-upper" } }, findBackup("files-cas")!.format).map((s) => s.name)).toEqual(["files-overlay-restore"]);
    expect(restoresForSnapshot({ format: findBackup("files-cas")!.format }).map((s) => s.name)).toEqual(["files-extract", "files-overlay-restore"]);
  });

  it("a chunked snapshot (its archive is an index) is read by the lazy restores only, and they read nothing else", () => {
    const chunked = findBackup("squashfs-chunked")!;
    expect(chunked.path).toBe("chunked");
    expect(extensionOf(chunked.format)).toBe("sqsh.index.json");
    expect(restoresFor(chunked.format).map((s) => s.name).sort()).toEqual(["lazy-overlay-restore", "lazy-squashfs", "lazy-squashfs-overlay"]);
    for (const b of STRATEGIES) {
      if (b.kind !== "backup" || b.name === chunked.name) continue;
      expect(restoresFor(b.format).filter((r) => r.materialize.startsWith("lazy") || r.name === "lazy-overlay-restore"), b.name).toEqual([]);
    }
    expect(findRestore("lazy-squashfs")?.requires).toEqual(["snapflow-lazy", "fusermount3"]);
    expect(findRestore("lazy-squashfs-overlay")?.needs).toEqual(["fuse", "cap_sys_admin", "fs:overlay"]);
    expect(findRestore("lazy-overlay-restore")?.requires).toEqual(["snapflow-lazy", "fusermount3"]);
  });
});

describe("fidelity (src/strategies/fidelity.ts): what each pair keeps, as GET /api/strategies shows it", () => {
  const outcomesOf = (backup: string, restore: string) => outcomes(pairFidelity(findBackup(backup)!.format, findRestore(restore)!));
  it("every strategy says what it cannot keep, with a reason, and a refusal names its error code", () => {
    for (const s of STRATEGIES) {
      for (const [property, note] of Object.entries(s.fidelity)) {
        expect(FIDELITY_PROPERTIES, s.name).toContain(property);
        expect(note!.why.length, `${s.name} ${property}`).toBeGreaterThan(20);
        if (note!.outcome === "refused") expect(note!.code, `${s.name} ${property}`).toBeDefined();
      }
    }
  });
  it("sparse files: kept by tar and kernel squashfs, lost where the materialization cannot show holes", () => {
    expect(outcomesOf("tar-zst-pipe", "presigned-tar-zst-pipe").sparse).toBe("kept");
    expect(outcomesOf("squashfs-zstd", "presigned-squashfs-mount").sparse).toBe("kept");
    expect(outcomesOf("squashfs-zstd", "presigned-squashfuse-mount").sparse).toBe("lost");
    expect(outcomesOf("squashfs-zstd", "overlay-restore").sparse).toBe("lost");
    expect(outcomesOf("squashfs-chunked", "lazy-overlay-restore").sparse).toBe("kept");
    expect(outcomesOf("erofs-lz4", "presigned-erofs-mount").sparse).toBe("kept");
    expect(outcomesOf("erofs-lz4", "presigned-erofs-extract").sparse).toBe("lost");
    expect(outcomesOf("erofs", "presigned-erofs-mount").sparse).toBe("lost");
  });
  it("what every pair refuses or loses alike", () => {
    for (const [b, r] of [["tar-zst-pipe", "restore-tar-zst"], ["squashfs-lz4", "restore-squashfs-extract"], ["erofs", "presigned-erofs-extract"]] as const) {
      expect(outcomesOf(b, r)).toMatchObject({ xattrs: "lost", acls: "lost", capabilities: "lost", sockets: "lost", "non-utf8-names": "refused", "hard-links": "kept" });
    }
  });
});

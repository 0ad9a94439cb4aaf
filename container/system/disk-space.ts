// Free space on the filesystem that holds a path (or would: the deepest ancestor that exists), for the space
// checks a restore makes before it writes, and for the message of a write that found the disk full.
import { statfs, stat } from "node:fs/promises";
import { dirname } from "node:path";

export interface DiskSpace {
  freeBytes: number;
  totalBytes: number;
  /** the filesystem's device: two paths on one device share their free space */
  device: string;
}

export async function diskSpace(path: string): Promise<DiskSpace> {
  let at = path;
  for (;;) {
    const st = await stat(at).catch(() => null);
    if (st) {
      const fs = await statfs(at);
      // bavail: what an unprivileged writer gets (the agent in a sandbox is one); bsize: the unit of both counts.
      return { freeBytes: fs.bavail * fs.bsize, totalBytes: fs.blocks * fs.bsize, device: String(st.dev) };
    }
    const up = dirname(at);
    if (up === at) throw new Error(`no part of ${path} exists`);
    at = up;
  }
}

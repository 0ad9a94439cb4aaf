// Pairs the entries of a tree or an archive with a manifest's, both read as streams in walk order (depth-first,
// names sorted: tree-walk.ts, manifest-layer.ts walkOrder), as a merge of two sorted lists: neither is held.
//
// A manifest is written in the order of the walk that made it, and a single-pass archive in the order of the walk
// that named its entries, so the two sides meet in order and nothing waits. Where they do not (a tool that sorts
// names by bytes where the walk sorts UTF-16 units, an archive that tar ordered itself, a liar), an entry read on
// one side waits for its pair in a window of WINDOW entries per side; the oldest waiting entry leaves the window
// unpaired (missing from the tree, or extra in it). So memory is bounded by two windows whatever either side
// holds, and an order that strays further than the window is a difference, never a pass.
import type { ManifestEntry } from "../contract/protocol.ts";
import { walkOrder } from "./manifest-layer.ts";

/** Entries each side may hold waiting for a pair: ~4096 × ~0.5 KB of entry objects, so ~2 MB per side at most. */
export const WINDOW = 1024;

export interface MatchSink<A> {
  pair(want: ManifestEntry, got: A): void;
  /** in the manifest, never met on the other side */
  missing(want: ManifestEntry): void;
  /** on the other side, not in the manifest */
  extra(got: A): void;
}

export class SortedMatch<A extends { path: string }> {
  private readonly wanted = new Map<string, ManifestEntry>();
  private readonly found = new Map<string, A>();
  private head: ManifestEntry | undefined;
  private ended = false;

  private readonly expected: AsyncIterator<ManifestEntry>;
  private readonly sink: MatchSink<A>;
  private readonly window: number;

  constructor(expected: AsyncIterator<ManifestEntry>, sink: MatchSink<A>, window = WINDOW) {
    this.expected = expected;
    this.sink = sink;
    this.window = window;
  }

  /** The next entry of the tree or archive: paired with the manifest's entry of its path, read up to it. */
  async add(got: A): Promise<void> {
    await this.readUpTo(got.path);
    const want = this.wanted.get(got.path);
    if (want) {
      this.wanted.delete(got.path);
      return this.sink.pair(want, got);
    }
    // A name met twice (an archive may hold one) pairs once: the second is extra.
    if (this.found.has(got.path)) return this.sink.extra(got);
    this.found.set(got.path, got);
    this.evict(this.found, (e) => this.sink.extra(e));
  }

  /** The other side ended: what is left unpaired on either is a difference. */
  async finish(): Promise<void> {
    await this.readUpTo(undefined);
    for (const want of this.wanted.values()) this.sink.missing(want);
    for (const got of this.found.values()) this.sink.extra(got);
    this.wanted.clear();
    this.found.clear();
  }

  /** Reads the manifest's entries up to `path` in walk order (all of them without one). */
  private async readUpTo(path: string | undefined): Promise<void> {
    while (!this.ended) {
      if (!this.head) {
        const next = await this.expected.next();
        if (next.done) {
          this.ended = true;
          return;
        }
        this.head = next.value;
      }
      if (path !== undefined && walkOrder(this.head.path, path) > 0) return;
      const want = this.head;
      this.head = undefined;
      const got = this.found.get(want.path);
      if (got) {
        this.found.delete(want.path);
        this.sink.pair(want, got);
        continue;
      }
      // A manifest that names a path twice: the first is kept, the second can pair with nothing.
      if (this.wanted.has(want.path)) {
        this.sink.missing(want);
        continue;
      }
      this.wanted.set(want.path, want);
      this.evict(this.wanted, (e) => this.sink.missing(e));
    }
  }

  private evict<T>(waiting: Map<string, T>, unpaired: (e: T) => void) {
    while (waiting.size > this.window) {
      const [oldest, e] = waiting.entries().next().value as [string, T];
      waiting.delete(oldest);
      unpaired(e);
    }
  }
}

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
  /** the manifest's batch being read, and the next entry in it */
  private batch: ManifestEntry[] = [];
  private next = 0;
  private ended = false;
  private readonly expected: AsyncIterator<ManifestEntry[]>;
  private readonly sink: MatchSink<A>;
  private readonly window: number;

  constructor(expected: AsyncIterator<ManifestEntry[]>, sink: MatchSink<A>, window = WINDOW) {
    this.expected = expected;
    this.sink = sink;
    this.window = window;
  }

  /**
   * The next entry of the tree or archive: paired with the manifest's entry of its path, read up to it. A promise
   * only when the manifest's next batch must be read first (callers await it then, and go on at once otherwise).
   */
  add(got: A): Promise<void> | undefined {
    if (this.readUpTo(got.path)) return this.pull().then(() => this.add(got));
    const want = this.wanted.get(got.path);
    if (want) {
      this.wanted.delete(got.path);
      this.sink.pair(want, got);
      return;
    }
    // A name met twice (an archive may hold one) pairs once: the second is extra.
    if (this.found.has(got.path)) return void this.sink.extra(got);
    this.found.set(got.path, got);
    this.evict(this.found, (e) => this.sink.extra(e));
  }

  /** The other side ended: what is left unpaired on either is a difference. */
  async finish(): Promise<void> {
    while (this.readUpTo(undefined)) await this.pull();
    for (const want of this.wanted.values()) this.sink.missing(want);
    for (const got of this.found.values()) this.sink.extra(got);
    this.wanted.clear();
    this.found.clear();
  }

  private async pull(): Promise<void> {
    const next = await this.expected.next();
    if (next.done) this.ended = true;
    else {
      this.batch = next.value;
      this.next = 0;
    }
  }

  /** Takes the manifest's entries up to `path` in walk order (all without one); true when its batch ran out first. */
  private readUpTo(path: string | undefined): boolean {
    while (true) {
      if (this.next === this.batch.length) return !this.ended;
      const head = this.batch[this.next]!;
      if (path !== undefined && walkOrder(head.path, path) > 0) return false;
      this.next++;
      const got = this.found.get(head.path);
      if (got) {
        this.found.delete(head.path);
        this.sink.pair(head, got);
        continue;
      }
      // A manifest that names a path twice: the first is kept, the second can pair with nothing.
      if (this.wanted.has(head.path)) {
        this.sink.missing(head);
        continue;
      }
      this.wanted.set(head.path, head);
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

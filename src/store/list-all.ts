// Every object under a prefix, page after page: the store answers at most a page per list call, and each caller
// would otherwise write the same cursor loop.
import type { ListedObject, ObjectStore } from "./object-store.ts";

export async function* listAll(store: ObjectStore, prefix: string): AsyncGenerator<ListedObject> {
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, { cursor, limit: 1000 });
    yield* page.objects;
    cursor = page.cursor;
  } while (cursor);
}

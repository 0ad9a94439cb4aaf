// KV accepts about one write per second to the same key and refuses a faster one (429). A write that must land —
// a run's final progress, a snapshot's index entry, a finished matrix's cached status — is tried again after the
// window has passed, a couple of times, before its caller decides what a refusal means.
export const KV_RETRY_DELAYS_MS = [1100, 2200];

export async function writeAfterKvWindow(write: () => Promise<unknown>, delaysMs: readonly number[] = KV_RETRY_DELAYS_MS): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await write();
      return;
    } catch (e) {
      if (attempt >= delaysMs.length) throw e;
      await new Promise((r) => setTimeout(r, delaysMs[attempt]));
    }
  }
}

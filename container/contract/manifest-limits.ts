// How large a manifest may be, on both sides (a sandbox chooses its manifest's size: 2.5 M entries made a 561 MB
// manifest that grew the agent from 155 MB to 1.8 GB on restore, issue 21). The Worker refuses a backup whose
// manifest passes either bound (MAX_MANIFEST_BYTES, MAX_MANIFEST_ENTRIES in its config), and the agent never reads
// more than the byte bound of a stored manifest (SNAPFLOW_MAX_MANIFEST_BYTES), so its memory is bounded by the
// setting whatever a snapshot holds. A 31k-entry npm workspace's manifest is about 10 MB: the defaults leave room
// for trees ten to thirty times that.
export const DEFAULT_MAX_MANIFEST_BYTES = 128 * 2 ** 20;
export const DEFAULT_MAX_MANIFEST_ENTRIES = 1_000_000;


// Keeps one part of the local stack running: when the agent or the object store exits on its own, it is started
// again (same port, same data directory, same secrets: the running Worker keeps reaching it) and the restart is
// logged. A part that keeps dying is not restarted for ever: more than `maxRestarts` exits within `windowMs` and
// the supervisor gives up, naming the part and its last words, so that `npm run dev` stops everything with a
// clear message instead of looping.

export interface Part {
  exited: Promise<number | null>;
  stop(): Promise<void>;
  /** SIGKILL, no grace: what a crash does (tests) */
  kill(): Promise<void>;
  /** its last output, for the give-up message */
  tail?(): string;
}

export interface Supervised<T extends Part> {
  current(): T;
  /** resolves with a message once the part is down and will not be restarted (never, while it is healthy) */
  gaveUp: Promise<string>;
  /** how many times it was restarted */
  restarts(): number;
  /** stop supervising, then stop the part */
  stop(): Promise<void>;
  kill(): Promise<void>;
}

export interface SuperviseOptions {
  log: (line: string) => void;
  /** false: the first exit is final (the stack stops); default true */
  restart?: boolean;
  maxRestarts?: number;
  windowMs?: number;
}

export function supervise<T extends Part>(name: string, first: T, start: () => Promise<T>, options: SuperviseOptions): Supervised<T> {
  const maxRestarts = options.maxRestarts ?? 5;
  const windowMs = options.windowMs ?? 60_000;
  let part = first;
  let stopped = false;
  const exits: number[] = [];
  let restarts = 0;
  let giveUp!: (why: string) => void;
  const gaveUp = new Promise<string>((r) => (giveUp = r));

  const watch = async () => {
    for (;;) {
      const code = await part.exited;
      if (stopped) return;
      const now = Date.now();
      exits.push(now);
      while (exits.length && exits[0]! < now - windowMs) exits.shift();
      const why = `${name} exited (${code === null ? "killed by a signal" : `code ${code}`})`;
      if (options.restart === false) return giveUp(`${why} unexpectedly`);
      if (exits.length > maxRestarts) return giveUp(`${why}: ${exits.length} exits within ${windowMs / 1000} s; not restarting it again${part.tail ? `. Its last output:\n${part.tail().trimEnd().split("\n").slice(-10).join("\n")}\n` : ""}`);
      options.log(`stack: ${why}; restarting it (${exits.length} of at most ${maxRestarts} in ${windowMs / 1000} s)`);
      for (;;) {
        try {
          const t0 = performance.now();
          part = await start();
          restarts++;
          options.log(`stack: ${name} is back (${Math.round(performance.now() - t0)} ms)`);
          break;
        } catch (e) {
          exits.push(Date.now());
          if (stopped) return;
          if (exits.length > maxRestarts) return giveUp(`${name} could not be restarted: ${e instanceof Error ? e.message : String(e)}`);
          options.log(`stack: restarting ${name} failed (${e instanceof Error ? e.message.split("\n")[0] : String(e)}); trying again in 1 s`);
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
    }
  };
  void watch();
  return {
    current: () => part,
    gaveUp,
    restarts: () => restarts,
    stop: async () => {
      stopped = true;
      await part.stop();
    },
    kill: async () => {
      stopped = true;
      await part.kill();
    },
  };
}

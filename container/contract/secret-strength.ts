// The bearer secrets that guard everything (API_TOKEN; AGENT_SECRET, from which every sandbox's token is derived)
// must be random, and randomness cannot be proven, only its obvious absence caught: a secret shorter than 32
// characters, one made of fewer than 8 distinct characters ("xxxx…", "0101…"), or one that repeats a shorter
// pattern ("change-me" padded to length by repetition) is refused, naming the variable and how to make a good one.
// A random secret never trips these: 32 random hex characters have fewer than 8 distinct ones with a probability
// below 10^-9. Pure, no imports: the Worker's config (src/config.ts) and the agent's start (agent.ts) share it.

export const MIN_SECRET_LENGTH = 32;
const MIN_DISTINCT = 8;

const HOW = "openssl rand -base64 32";

/** Whether `s` is a shorter string repeated (its smallest period is at most half its length). */
function repeatsAPattern(s: string): boolean {
  for (let p = 1; p <= s.length / 2; p++) {
    let periodic = true;
    for (let i = p; i < s.length && periodic; i++) periodic = s[i] === s[i - p];
    if (periodic) return true;
  }
  return false;
}

/** Why `value` is not good enough for the secret `name`, or undefined when it is. */
export function weakSecretReason(name: string, value: string): string | undefined {
  if (value.length < MIN_SECRET_LENGTH) return `set the ${name} secret to at least ${MIN_SECRET_LENGTH} random characters (${HOW}); it has ${value.length}`;
  const distinct = new Set(value).size;
  if (distinct < MIN_DISTINCT) return `${name} is not random (only ${distinct} distinct characters); make one with ${HOW}`;
  if (repeatsAPattern(value)) return `${name} is not random (it repeats a shorter pattern); make one with ${HOW}`;
  return undefined;
}

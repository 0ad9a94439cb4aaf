// Starts a private stack on an existing state directory and keeps it up until SIGTERM (for poking at it by hand).
// Usage: node scripts/experiments/hold-stack.ts DIR PORT
import { startStack } from "../stack/stack.ts";

const [dir, port] = process.argv.slice(2);
const stack = await startStack({ port: Number(port), privateDir: dir!, log: (l) => console.error(l) });
console.log(JSON.stringify({ apiUrl: stack.apiUrl, apiToken: stack.apiToken, upAt: stack.upAt }));
process.on("SIGTERM", () => void stack.stop().then(() => process.exit(0)));

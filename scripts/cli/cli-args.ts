// The command line, parsed per command: the command (a typo gets "did you mean"), then only the flags that command
// takes. A bad flag, a flag without its value or a missing id is one line naming the flag and where its help is —
// never parseArgs' stack trace. Pure: answers what to do, prints nothing.
import { parseArgs } from "node:util";
import { COMMAND_NAMES, COMMANDS, FLAGS, GLOBAL_FLAGS, isCommand, type CommandName, type Flag } from "./cli-commands.ts";
import { didYouMean } from "./did-you-mean.ts";

export type Values = { [K in Flag]?: (typeof FLAGS)[K] extends { multiple: true } ? string[] : (typeof FLAGS)[K] extends { type: "boolean" } ? boolean : string };

export type Parsed =
  | { kind: "run"; command: CommandName; values: Values; rest: string[] }
  | { kind: "help"; command?: CommandName }
  | { kind: "usage"; message: string };

const helpHint = (command?: CommandName) => (command ? `see: npx snapflow help ${command}` : "see: npx snapflow --help");

/** `snapflow <command>: <message> (see: …)`: how every usage error reads. */
export function usageLine(command: CommandName | undefined, message: string, hint = helpHint(command)): string {
  return `snapflow${command ? ` ${command}` : ""}: ${message} (${hint})`;
}

export function parseCommandLine(argv: readonly string[]): Parsed {
  // First pass, all flags known and nothing refused: where the command is (global flags may come before it).
  const loose = parseArgs({ args: [...argv], options: FLAGS, allowPositionals: true, strict: false });
  const [first, ...after] = loose.positionals;
  if (first === undefined) return loose.values.help ? { kind: "help" } : { kind: "usage", message: usageLine(undefined, "which command? e.g. npx snapflow backup --sandbox ID") };
  if (!isCommand(first)) return { kind: "usage", message: usageLine(undefined, `unknown command '${first}'${didYouMean(first, COMMAND_NAMES)}`) };
  const command = first;
  if (command === "help") {
    const of = after[0];
    if (of === undefined) return { kind: "help" };
    return isCommand(of) ? { kind: "help", command: of } : { kind: "usage", message: usageLine(undefined, `no command '${of}'${didYouMean(of, COMMAND_NAMES)}`) };
  }
  if (loose.values.help) return { kind: "help", command };

  // Second pass: only this command's flags.
  const allowed = [...GLOBAL_FLAGS, ...COMMANDS[command].flags];
  const options = Object.fromEntries(allowed.map((f) => [f, FLAGS[f]]));
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true });
  } catch (e) {
    return { kind: "usage", message: usageLine(command, flagError(e as NodeJS.ErrnoException, command, allowed)) };
  }
  const values = parsed.values as Values;
  const rest = parsed.positionals.slice(1);
  const c = COMMANDS[command] as { needsId?: boolean; required?: readonly Flag[] };
  for (const f of c.required ?? []) if (values[f] === undefined) return { kind: "usage", message: usageLine(command, `--${f} is required`) };
  if (c.needsId && !rest[0] && !(command === "report" && values.from)) return { kind: "usage", message: usageLine(command, `${command} needs an id`) };
  if (command === "report" && !values.from && !rest[0]) return { kind: "usage", message: usageLine(command, "give a matrix id or --from FILE.json") };
  const extra = rest.slice(c.needsId || command === "report" ? 1 : 0);
  if (extra.length) return { kind: "usage", message: usageLine(command, `unexpected '${extra[0]}'`) };
  return { kind: "run", command, values, rest };
}

/** parseArgs' errors in our words: the flag, what is wrong with it, a near flag this command has. */
function flagError(e: NodeJS.ErrnoException, command: CommandName, allowed: readonly Flag[]): string {
  const flag = /'(-{1,2}[^' =<]+)/.exec(e.message)?.[1] ?? "?";
  if (e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    const name = flag.replace(/^-+/, "");
    const elsewhere = Object.hasOwn(FLAGS, name) ? `; ${command} does not take it` : "";
    return `unknown flag ${flag}${elsewhere}${didYouMean(name, allowed).replace(/did you mean (\S+)\?$/, "did you mean --$1?")}`;
  }
  if (e.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    if (/does not take an argument/.test(e.message)) return `${flag} takes no value`;
    return `${flag} needs a value (${flag} VALUE, or ${flag}=VALUE for one that starts with '-')`;
  }
  return e.message.split("\n")[0]!;
}

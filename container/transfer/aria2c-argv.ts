// Pure: how aria2c is told what to fetch. The presigned URL is a credential until it expires, so it never goes on
// the command line (any process in the sandbox reads /proc/<pid>/cmdline) nor into a file: aria2c reads it from
// its standard input (`-i -`), in its input-file format, with the output's directory and name as options.
// No I/O, so tests can check that no URL reaches argv.

/** The argv: N connections (-x/-s N, 1 MiB pieces), retries, quiet console, and the input on stdin. */
export function aria2cArgv(concurrency: number, retries: number): string[] {
  const n = String(concurrency);
  return [
    "aria2c", "-x", n, "-s", n, "-k", "1M", "--allow-overwrite=true", "--auto-file-renaming=false",
    `--max-tries=${retries + 1}`, "--retry-wait=1", "--console-log-level=error", "--summary-interval=0", "--download-result=hide", "--enable-color=false",
    "-i", "-",
  ];
}

/** What aria2c reads on stdin: the URL, then its per-download options (indented, as aria2c's input files take them). */
export function aria2cInput(url: string, dir: string, name: string): string {
  if (/[\r\n]/.test(url) || /[\r\n]/.test(dir) || /[\r\n]/.test(name)) throw new Error("aria2c input: a URL, directory or name holding a line break would be read as another line");
  return `${url}\n  dir=${dir}\n  out=${name}\n`;
}

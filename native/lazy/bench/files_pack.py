#!/usr/bin/env python3
"""Measures `snapflow-lazy files-pack` on a real tree; prints JSON figures (medians of RUNS) for MEASUREMENTS.md.

usage: bench/files_pack.py TREE WORKDIR
TREE is read only: it is copied to WORKDIR (cp -a), which the incremental changes and which is removed after.
  full:        RUNS backups of the copy, the pack PUT in PART_MIB (16) MiB parts to a loopback sink (this script's threads:
               they read each body and answer an ETag, as a store's UploadPart does)
  incremental: 8 new files of 1.25 MiB of random bytes and one small file edited, then RUNS backups over the last
               full one's index (its kept file)
  tar.zst:     once, `snapflow-lazy pack` of the unchanged copy to a file, for its size
Wall time is the process's; CPU-s its user + system time (getrusage of the reaped child).
"""
import hashlib, http.server, json, os, resource, shutil, statistics, subprocess, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(HERE, "..", "bin", "snapflow-lazy")
RUNS = int(os.environ.get("RUNS", "3"))
PART = int(os.environ.get("PART_MIB", "16")) << 20


class Sink(http.server.BaseHTTPRequestHandler):
    def do_PUT(self):
        left = int(self.headers["Content-Length"])
        while left > 0:
            left -= len(self.rfile.read(min(left, 1 << 20)))
        self.send_response(200)
        self.send_header("ETag", '"%s"' % self.path.rsplit("=", 1)[-1])
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def run(args, request):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([BIN, *args, "--result-fd", "1"], input=json.dumps(request), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{args[0]} failed: {p.stdout} {p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(p.stdout), round(wall, 3), round(cpu, 3)


def files_pack(tree, work, tag, urls, base=None):
    req = {"name": tag, "urls": urls}
    if base:
        req["base"] = base
    return run(["files-pack", "--root", tree, "--manifest", f"{work}/{tag}.json", "--index", f"{work}/{tag}.index.zst",
                "--part-size", str(PART), "--concurrency", "4"], req)


def summary(runs, keys):
    walls, cpus = [w for _, w, _ in runs], [c for _, _, c in runs]
    r = runs[-1][0]
    return {"wall_s": statistics.median(walls), "walls": walls, "cpu_s": statistics.median(cpus), "cpus": cpus,
            **{k: r[k] for k in keys}, "packBytes": r["pack"]["bytes"] if r["pack"] else 0, "indexBytes": r["index"]["bytes"],
            "parts": len(r["parts"])}


def main():
    src, work = sys.argv[1], sys.argv[2]
    os.makedirs(work)
    tree = os.path.join(work, "tree")
    subprocess.run(["cp", "-a", src, tree], check=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    urls = [f"http://127.0.0.1:{server.server_port}/pack?partNumber={n}" for n in range(1, 65)]
    try:
        full = [files_pack(tree, work, f"full{i}", urls) for i in range(RUNS)]
        _, tar_wall, tar_cpu = run(["pack", "--root", tree, "--manifest", f"{work}/tar.json", "--out", f"{work}/tree.tar.zst"], {"level": 3})
        tar_bytes = os.path.getsize(f"{work}/tree.tar.zst")
        os.remove(f"{work}/tree.tar.zst")
        index = f"{work}/full{RUNS - 1}.index.zst"
        base = {"file": index, "sha256": hashlib.sha256(open(index, "rb").read()).hexdigest()}
        for i in range(8):
            with open(os.path.join(tree, f"added-{i}.bin"), "wb") as f:
                f.write(os.urandom(1_310_720))
        edited = next(os.path.join(d, n) for d, _, names in sorted(os.walk(tree)) for n in sorted(names)
                      if n.endswith(".md") and 0 < os.path.getsize(os.path.join(d, n)) < 8192)
        with open(edited, "a") as f:
            f.write("\nedited\n")
        inc = [files_pack(tree, work, f"inc{i}", urls, base) for i in range(RUNS)]
        keys = ["entries", "read", "reused", "newChunks", "newBytes", "walkMs", "ms"]
        print(json.dumps({"runs": RUNS, "full": summary(full, keys), "incremental": {**summary(inc, keys), "edited": os.path.relpath(edited, tree)},
                          "tarZst": {"bytes": tar_bytes, "wall_s": tar_wall, "cpu_s": tar_cpu}}, indent=1))
    finally:
        server.shutdown()
        shutil.rmtree(work)


if __name__ == "__main__":
    main()

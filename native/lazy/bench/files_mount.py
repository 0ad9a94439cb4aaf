#!/usr/bin/env python3
"""Lazy restore from a file-level index (files-mount) against today's lazy image path (mount + kernel squashfs), on
one tree: exec → ready, first use (`node -e "require('typescript')"` in the tree, cold: fresh cache, caches dropped),
complete (status completeMs), CPU-seconds of the helper. Prints JSON (every run, and medians).

usage: bench/files_mount.py WORK    (root; WORK holds index.zst, and store/packs/<name> + store/chunks/<sha> served
       by bench/fileserver, ws.idx.json for the image path; see MEASUREMENTS.md "Lazy restore from a file-level index")
"""
import json, os, resource, shutil, signal, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("BIN", os.path.join(HERE, "..", "bin", "snapflow-lazy"))
RUNS = int(os.environ.get("RUNS", "3"))
PORT = int(os.environ.get("PORT", "18766"))
PREFETCH = os.environ.get("PREFETCH", "16")
FIRST_USE = ["node", "-e", "require('typescript')"]


def ms(t0):
    return round((time.perf_counter() - t0) * 1000, 1)


def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick  # utime + stime


def wait_status(path, key, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            s = json.load(open(path))
            if s.get(key, -1) >= 0:
                return s
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{path}: no {key} within {timeout} s")


def node_first_use(cwd):
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(FIRST_USE, cwd=cwd, check=True, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ms(t0), round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 2)


def run(work, kind, i):
    d = os.path.join(work, f"run-{kind}-{i}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cache, mnt, status = os.path.join(d, "cache"), os.path.join(d, "mnt"), os.path.join(d, "status.json")
    urls = os.path.join(d, "urls.json")
    if kind == "files":
        packs = os.listdir(os.path.join(work, "store", "packs"))
        json.dump({p: f"http://127.0.0.1:{PORT}/packs/{p}" for p in packs}, open(urls, "w"))
        argv = [BIN, "files-mount", "--index", os.path.join(work, "index.zst"), "--urls", urls, "--cache", cache,
                "--mountpoint", mnt, "--status", status, "--prefetch", PREFETCH] + os.environ.get("FILES_ARGS", "").split()
    else:
        idx = json.load(open(os.path.join(work, "ws.idx.json")))
        json.dump({c["sha256"]: f"http://127.0.0.1:{PORT}/chunks/{c['sha256']}" for c in idx["chunks"]}, open(urls, "w"))
        argv = [BIN, "mount", "--index", os.path.join(work, "ws.idx.json"), "--urls", urls, "--cache", cache,
                "--mountpoint", mnt, "--status", status, "--prefetch", PREFETCH]
    drop_caches()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        return measure(p, kind, t0, mnt, status, d)
    finally:
        if p.poll() is None:
            for m in (os.path.join(d, "sq"), mnt):
                subprocess.run(["umount", m], capture_output=True)
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=20)
        shutil.rmtree(d, ignore_errors=True)


def measure(p, kind, t0, mnt, status, d):
    ready = json.loads(p.stdout.readline())
    out = {"execToReadyMs": ms(t0), "readyMs": ready["readyMs"], "indexMs": ready.get("indexMs", 0)}
    tree, sq = mnt, None
    if kind == "image":
        sq = os.path.join(d, "sq")
        os.makedirs(sq)
        subprocess.run(["mount", "-t", "squashfs", "-o", "loop,ro,nosuid,nodev", os.path.join(mnt, "image"), sq], check=True)
        out["execToTreeMs"] = ms(t0)
        tree = sq
    else:
        out["execToTreeMs"] = out["execToReadyMs"]
    out["firstUseMs"], out["firstUseNodeCpuS"] = node_first_use(tree)
    out["requestToFirstUseDoneMs"] = ms(t0)
    time.sleep(0.3)  # the status is rewritten at most every 200 ms
    s = wait_status(status, "completeMs") if PREFETCH != "0" else json.load(open(status))
    out["completeMs"] = s["completeMs"]
    out["helperCpuS"] = round(cpu_of(p.pid), 2)
    out["chunks"] = s["chunks"]["total"]
    out["onDemand"] = s["chunks"]["onDemand"]
    out["bytesOnDemand"] = s["bytes"]["onDemand"]
    if sq:
        subprocess.run(["umount", sq], check=True)
    return out


def main():
    work = os.path.abspath(sys.argv[1])
    server = subprocess.Popen([os.path.join(work, "fileserver"), os.path.join(work, "store"), f"127.0.0.1:{PORT}"])
    time.sleep(0.5)
    try:
        runs = {"files": [], "image": []}
        for i in range(RUNS):  # alternated, so both see the same load
            for kind in os.environ.get("KINDS", "files,image").split(","):
                runs[kind].append(run(work, kind, i))
                print(kind, runs[kind][-1], file=sys.stderr)
        med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
        print(json.dumps({"runs": runs, "median": med}, indent=1))
    finally:
        server.terminate()


if __name__ == "__main__":
    main()

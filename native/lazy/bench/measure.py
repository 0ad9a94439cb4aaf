#!/usr/bin/env python3
"""Measures snapflow-lazy on a real image; prints JSON figures (medians of RUNS) for MEASUREMENTS.md.

usage: bench/measure.py IMAGE TREE WORKDIR     (as root: it mounts FUSE and squashfs)
IMAGE is a squashfs of TREE (an npm tree); WORKDIR gets a chunk store, caches and mountpoints, and is emptied after.
"""
import json, os, random, shutil, signal, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(HERE, "..", "bin", "snapflow-lazy")
RUNS = int(os.environ.get("RUNS", "3"))
PORT = 18765
AVGS = os.environ.get("AVGS", "256KiB,512KiB,1MiB").split(",")
FIRST_USE = ["node", "-e", "require('typescript')"]


def ms(t0):
    return round((time.perf_counter() - t0) * 1000, 1)


def med(xs):
    return statistics.median(xs)


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def chunk(image, avg):
    times, out = [], None
    for _ in range(RUNS):
        t0 = time.perf_counter()
        out = sh("nice", "-n", "10", BIN, "chunk", "--image", image, "--avg", avg).stdout
        times.append(ms(t0))
    return json.loads(out), med(times), times


def fill_store(image, idx, work):
    store = os.path.join(work, "store", "chunks")
    os.makedirs(store, exist_ok=True)
    urls = {}
    with open(image, "rb") as f:
        for c in idx["chunks"]:
            p = os.path.join(store, c["sha256"])
            if not os.path.exists(p):
                f.seek(c["offset"])
                with open(p, "wb") as out:
                    out.write(f.read(c["size"]))
            urls[c["sha256"]] = f"http://127.0.0.1:{PORT}/chunks/{c['sha256']}"
    return urls


class Mount:
    def __init__(self, work, idx_path, urls_path, prefetch):
        self.cache = os.path.join(work, "cache")
        self.mnt = os.path.join(work, "mnt")
        shutil.rmtree(self.cache, ignore_errors=True)
        t0 = time.perf_counter()
        self.p = subprocess.Popen([BIN, "mount", "--index", idx_path, "--urls", urls_path, "--cache", self.cache,
                                   "--mountpoint", self.mnt, "--prefetch", str(prefetch)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.ready = json.loads(self.p.stdout.readline())
        self.exec_to_ready_ms = ms(t0)

    def status(self):
        with open(os.path.join(self.cache, "status.json")) as f:
            return json.load(f)

    def wait_complete(self, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            s = self.status()
            if s["completeMs"] >= 0:
                return s
            time.sleep(0.02)
        raise RuntimeError("never complete")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        assert self.p.wait(10) == 0


def first_use(work, idx_path, urls_path, kernel):
    """Bytes fetched on demand (no prefetch) until `node -e "require('typescript')"` succeeds over the mounted image."""
    m = Mount(work, idx_path, urls_path, prefetch=0)
    sq = os.path.join(work, "sq")
    os.makedirs(sq, exist_ok=True)
    try:
        t0 = time.perf_counter()
        if kernel:
            sh("mount", "-t", "squashfs", "-o", "loop,ro,nosuid,nodev", os.path.join(m.mnt, "image"), sq)
        else:
            sh("squashfuse", os.path.join(m.mnt, "image"), sq)
        mount_ms = ms(t0)
        t0 = time.perf_counter()
        sh(*FIRST_USE, env=dict(os.environ, NODE_PATH=sq))
        node_ms = ms(t0)
        time.sleep(0.3)  # status.json is rewritten at most every 200 ms
        s = m.status()
    finally:
        subprocess.run(["umount", sq])
        m.stop()
    return {"readyMs": m.ready["readyMs"], "execToReadyMs": m.exec_to_ready_ms, "squashfsMountMs": mount_ms,
            "nodeMs": node_ms, "chunks": s["chunks"]["onDemand"], "bytes": s["bytes"]["onDemand"]}


def complete(work, idx_path, urls_path, prefetch):
    m = Mount(work, idx_path, urls_path, prefetch)
    s = m.wait_complete()
    m.stop()
    return {"completeMs": s["completeMs"], "readyMs": s["readyMs"], "attempts": s["fetchAttempts"]}


def download_once(work):
    """The baseline: download the whole image over the same server, then loop-mount it."""
    out, sq = os.path.join(work, "dl.sqfs"), os.path.join(work, "sq")
    os.makedirs(sq, exist_ok=True)
    t0 = time.perf_counter()
    sh("curl", "-sf", "-o", out, f"http://127.0.0.1:{PORT}/image.sqfs")
    dl = ms(t0)
    sh("mount", "-t", "squashfs", "-o", "loop,ro,nosuid,nodev", out, sq)
    total = ms(t0)
    sh("umount", sq)
    os.remove(out)
    return {"downloadMs": dl, "downloadAndMountMs": total}


def dedup(tree, work, avgs):
    """An image of TREE versus one of TREE with ~10 MB changed and added: chunks shared, bytes a fork would upload."""
    t2 = os.path.join(work, "tree2")
    sh("cp", "-a", tree, t2)
    rnd = random.Random(10)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(t2) for f in fs if f.endswith(".js"))
    changed, touched = 0, 0
    for p in rnd.sample(files, len(files)):  # files totalling ~5 MB get a line appended (a fork editing sources)
        if changed >= 5 << 20:
            break
        changed += os.path.getsize(p)
        touched += 1
        with open(p, "ab") as f:
            f.write(f"\n// changed {rnd.random()}\n".encode())
    added = os.path.join(t2, "zz-added")
    os.makedirs(added)
    for i in range(100):  # ~5 MB of new files, half text, half random
        data = os.urandom(50_000) if i % 2 else (f"export const v{i} = {rnd.random()};\n" * 1800).encode()[:50_000]
        with open(os.path.join(added, f"f{i}.js"), "wb") as f:
            f.write(data)
    img2 = os.path.join(work, "tree2.sqfs")
    sh("nice", "-n", "10", "mksquashfs", t2, img2, "-comp", "zstd", "-Xcompression-level", "3", "-noappend", "-quiet", "-no-progress")
    shutil.rmtree(t2)
    out = {"changedFiles": touched, "changedFileBytes": changed, "addedBytes": 100 * 50_000, "image1Size": os.path.getsize(IMAGE), "image2Size": os.path.getsize(img2)}
    for avg in avgs:
        a = json.loads(sh(BIN, "chunk", "--image", IMAGE, "--avg", avg).stdout)
        b = json.loads(sh(BIN, "chunk", "--image", img2, "--avg", avg).stdout)
        have = {c["sha256"] for c in a["chunks"]}
        new = {c["sha256"]: c["size"] for c in b["chunks"] if c["sha256"] not in have}
        out[avg] = {"chunks2": len(b["chunks"]), "shared": len(b["chunks"]) - len(new), "newChunks": len(new),
                    "uploadBytes": sum(new.values())}
    os.remove(img2)
    return out


def main():
    global IMAGE
    IMAGE, tree, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    fileserver = os.path.join(HERE, "..", "bin", "fileserver")
    sh("go", "build", "-o", fileserver, "./bench/fileserver", cwd=os.path.join(HERE, ".."))
    os.makedirs(os.path.join(work, "store"), exist_ok=True)
    shutil.copy(IMAGE, os.path.join(work, "store", "image.sqfs"))
    server = subprocess.Popen([fileserver, os.path.join(work, "store"), f"127.0.0.1:{PORT}"], stderr=subprocess.DEVNULL)
    report = {"image": IMAGE, "imageSize": os.path.getsize(IMAGE), "runs": RUNS, "perAvg": {}, "loadavgStart": os.getloadavg()}
    try:
        for _ in range(100):
            if subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{PORT}/"]).returncode == 0:
                break
            time.sleep(0.2)
        for avg in AVGS:
            idx, chunk_ms, chunk_runs = chunk(IMAGE, avg)
            sizes = [c["size"] for c in idx["chunks"]]
            idx_path, urls_path = os.path.join(work, f"idx-{avg}.json"), os.path.join(work, f"urls-{avg}.json")
            with open(idx_path, "w") as f:
                json.dump(idx, f)
            with open(urls_path, "w") as f:
                json.dump(fill_store(IMAGE, idx, work), f)
            r = {"chunks": len(sizes), "meanSize": round(statistics.mean(sizes)), "medianSize": med(sizes),
                 "minSize": min(sizes), "maxSize": max(sizes), "chunkMs": chunk_ms, "chunkRuns": chunk_runs}
            for kernel in (True, False):
                runs = [first_use(work, idx_path, urls_path, kernel) for _ in range(RUNS)]
                r["firstUse" + ("Kernel" if kernel else "Squashfuse")] = {
                    k: med([x[k] for x in runs]) for k in runs[0]} | {"runs": runs}
            # Interleaved with the download baseline, so both see the same load on this shared machine.
            runs = {4: [], 8: [], "download": []}
            for _ in range(RUNS):
                runs["download"].append(download_once(work))
                for pf in (4, 8):
                    runs[pf].append(complete(work, idx_path, urls_path, pf))
            for pf in (4, 8):
                r[f"completePrefetch{pf}"] = {k: med([x[k] for x in runs[pf]]) for k in runs[pf][0]} | {"runs": runs[pf]}
            r["download"] = {k: med([x[k] for x in runs["download"]]) for k in runs["download"][0]} | {"runs": runs["download"]}
            report["perAvg"][avg] = r
            print(json.dumps({avg: r}), file=sys.stderr)
        if not os.environ.get("SKIP_DEDUP"):
            report["dedup"] = dedup(tree, work, AVGS)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    report["loadavgEnd"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How many prefetch workers a lazy restore needs to complete as fast as download-then-mount when the store is far.

usage: bench/latency.py IMAGE WORKDIR     (as root: it mounts FUSE and squashfs)
For each LATENCIES (ms, default "0,30": loopback, and a remote store's time to first byte), the image is served by
bench/fileserver with that delay before every response, and, interleaved RUNS times (default 3): the whole image
downloaded and loop-mounted, and a lazy mount with no reads left to complete with PREFETCH workers (default
"4,8,16,32"). Prints JSON: medians per latency. Chunks at 512 KiB average, as restores use.
"""
import json, os, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402  (its Mount, complete, download_once and fill_store)

RUNS = int(os.environ.get("RUNS", "3"))
LATENCIES = [int(x) for x in os.environ.get("LATENCIES", "0,30").split(",")]
PREFETCH = [int(x) for x in os.environ.get("PREFETCH", "4,8,16,32").split(",")]


def main():
    image, work = sys.argv[1:3]
    measure.IMAGE = image
    os.makedirs(os.path.join(work, "store"), exist_ok=True)
    fileserver = os.path.join(measure.HERE, "..", "bin", "fileserver")
    measure.sh("go", "build", "-o", fileserver, "./bench/fileserver", cwd=os.path.join(measure.HERE, ".."))
    shutil.copy(image, os.path.join(work, "store", "image.sqfs"))
    idx = json.loads(measure.sh(measure.BIN, "chunk", "--image", image, "--avg", "512KiB").stdout)
    idx_path, urls_path = os.path.join(work, "idx.json"), os.path.join(work, "urls.json")
    with open(idx_path, "w") as f:
        json.dump(idx, f)
    with open(urls_path, "w") as f:
        json.dump(measure.fill_store(image, idx, work), f)
    report = {"image": image, "imageSize": os.path.getsize(image), "chunks": len(idx["chunks"]), "runs": RUNS, "byLatencyMs": {}}
    try:
        for latency in LATENCIES:
            server = subprocess.Popen([fileserver, os.path.join(work, "store"), f"127.0.0.1:{measure.PORT}", f"{latency}ms"], stderr=subprocess.DEVNULL)
            try:
                for _ in range(100):
                    if subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{measure.PORT}/"]).returncode == 0:
                        break
                    time.sleep(0.2)
                runs = {"download": [], **{pf: [] for pf in PREFETCH}}
                for _ in range(RUNS):
                    runs["download"].append(measure.download_once(work)["downloadAndMountMs"])
                    for pf in PREFETCH:
                        runs[pf].append(measure.complete(work, idx_path, urls_path, pf)["completeMs"])
                report["byLatencyMs"][latency] = {str(k): {"median": measure.med(v), "runs": v} for k, v in runs.items()}
            finally:
                server.terminate()
                server.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

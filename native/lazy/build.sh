#!/bin/sh
# Builds snapflow-lazy to native/lazy/bin/snapflow-lazy (or $SNAPFLOW_LAZY_OUT): a static binary (CGO off; go-fuse needs
# no libfuse), so it runs in any Linux sandbox image. Returns at once when the binary is newer than every source.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${SNAPFLOW_LAZY_OUT:-$here/bin/snapflow-lazy}

if [ -x "$out" ] && [ -z "$(find "$here" -path "$here/bin" -prune -o \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$out" -print | head -n 1)" ]; then
  echo "snapflow-lazy: up to date ($out)"
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "snapflow-lazy: needs Go ≥ 1.26 (https://go.dev/dl)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
cd "$here"
CGO_ENABLED=0 GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -ldflags="-s -w" -o "$out.tmp" ./cmd/snapflow-lazy
mv "$out.tmp" "$out"
echo "snapflow-lazy: built $out"

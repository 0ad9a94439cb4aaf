#!/bin/sh
# Builds snapflow-lazy to native/lazy/bin/snapflow-lazy (or $SNAPFLOW_LAZY_OUT): a static binary (go-fuse needs no
# libfuse), so it runs in any Linux sandbox image. cgo for one thing only: zstd's C library, compiled from the sources
# github.com/DataDog/zstd vendors (internal/czstd says why), linked statically with the pure-Go user and DNS code
# (netgo, osusergo), so a C compiler is needed to build it, not to run it. The Dockerfile builds it the same way.
# Returns at once when the binary is newer than every source.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${SNAPFLOW_LAZY_OUT:-$here/bin/snapflow-lazy}

if [ -x "$out" ] && [ -z "$(find "$here" -path "$here/bin" -prune -o \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$out" -print | head -n 1)" ]; then
  echo "snapflow-lazy: up to date ($out)"
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "snapflow-lazy: needs Go ≥ 1.26 (https://go.dev/dl)" >&2; exit 1; }
command -v "${CC:-cc}" >/dev/null 2>&1 || { echo "snapflow-lazy: needs a C compiler for zstd's C library (Debian/Ubuntu: apt-get install gcc libc6-dev)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
cd "$here"
# The same flags as the Go tests' (test/node/lazy-go-unit.test.ts), so that zstd's C sources compile once per machine.
CGO_ENABLED=1 GOFLAGS="-mod=readonly -trimpath -tags=netgo,osusergo" nice -n 10 go build -ldflags="-s -w -linkmode external -extldflags -static" -o "$out.tmp" ./cmd/snapflow-lazy
mv "$out.tmp" "$out"
echo "snapflow-lazy: built $out"

# The production sandbox image: the Sandbox SDK's base image (its control server on port 3000 stays the
# entrypoint), the tools the agent drives, and the agent itself. The tag must match the installed
# @cloudflare/sandbox version (the SDK warns when they differ); test/node/dockerfile-unit.test.ts checks both that
# and that every tool the agent's probe knows is installed here.

# Stage 1: bundle the agent (TypeScript + zod) into one file with the Bun that the base image ships. With
# package-lock.json beside it, bun install takes the versions the tests ran (it reads npm's lockfile); without,
# it would take the newest each range allows on the day the image is built.
FROM docker.io/cloudflare/sandbox:0.12.10 AS agent-build
WORKDIR /build
COPY package.json package-lock.json ./
RUN bun install --production --ignore-scripts
COPY container/ container/
RUN bun build container/agent.ts --target=bun --outfile=/build/agent.js
RUN bun build container/tool-versions.ts --target=bun --outfile=/build/tool-versions.js

# Stage 2: snapflow-lazy (native/lazy): the FUSE helper for lazy restores and the backup engine (`pack`, the default
# backup's single pass); a static Go binary, built as native/lazy/build.sh builds it: cgo only for zstd's C library
# (DataDog/zstd's vendored sources; the golang image has gcc), linked statically. Its modules (go-fuse, fastcdc,
# klauspost/compress, DataDog/zstd) come from go.sum.
FROM docker.io/library/golang:1.26 AS lazy-build
WORKDIR /build
COPY native/lazy/ ./
RUN CGO_ENABLED=1 GOFLAGS="-mod=readonly -trimpath -tags=netgo,osusergo" go build -ldflags="-s -w -linkmode external -extldflags -static" -o /build/snapflow-lazy ./cmd/snapflow-lazy

# Stage 3: the sandbox.
FROM docker.io/cloudflare/sandbox:0.12.10
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      tar gzip zstd lz4 pigz squashfs-tools squashfs-tools-ng squashfuse fuse3 fuse-overlayfs erofs-utils curl aria2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=agent-build /build/agent.js /opt/snapflow/agent.js
COPY --from=agent-build /build/tool-versions.js /opt/snapflow/tool-versions.js
COPY --from=lazy-build /build/snapflow-lazy /usr/local/bin/snapflow-lazy
RUN mkdir -p /workspace /snapflow/staging /snapflow/mnt
# Every tool (all installed above) asked its version once, here: a sandbox's agent starts with the answers
# (container/system/probe.ts), so a wake's first probe spawns none of them (86-125 ms otherwise, in every fresh
# sandbox; scripts/experiments/first-probe.ts).
RUN bun /opt/snapflow/tool-versions.js /opt/snapflow/tool-versions.json
# The agent's port. The Worker starts the agent with sandbox.startProcess, handing it this sandbox's own token
# (HMAC of the Worker's AGENT_SECRET and the sandbox id; the secret never enters a sandbox), and reaches it with
# containerFetch(request, 8080). EXPOSE also serves local Docker dev.
EXPOSE 8080

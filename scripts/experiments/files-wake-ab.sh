#!/bin/bash
# Alternates files-wake.ts's sleeps (SLEEP=1, RUNS each) between two checkouts, ROUNDS times (A B, A B, …), on this
# machine with nothing else running: each checkout needs node_modules and its own native/lazy/bin/snapflow-lazy, and
# both run this checkout's files-wake.ts (copied in, so the two measure alike). Prints each sleep's lines prefixed by
# the checkout's letter and round. Usage: scripts/experiments/files-wake-ab.sh DIR_A DIR_B [ROUNDS] [RUNS]
set -u
a=$1 b=$2 rounds=${3:-3} runs=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
for dir in "$a" "$b"; do cp "$here/files-wake.ts" "$dir/scripts/experiments/files-wake.ts"; done
for round in $(seq "$rounds"); do
  for w in a b; do
    dir=$a; [ "$w" = b ] && dir=$b
    (cd "$dir" && SLEEP=1 timeout 900 node_modules/.bin/node scripts/experiments/files-wake.ts "$runs" 2>&1 | grep "sleep: " | sed "s/^/$w r$round /")
  done
done

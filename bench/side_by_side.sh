#!/usr/bin/env bash
# One benchmark script run with the code at a baseline commit and at the working tree, alternating, in one session,
# each tree running its own copy of the script with the same arguments and the same .venv (and cache):
#   bench/side_by_side.sh 4fbecf1 ROUNDS bench/http_backend.py --items 40 --server dateeval
# Prints each run's own output under a header naming the tree, the round, wall seconds and the load before it:
# compare the two trees within a round (machines are shared; a ratio within one round is what holds).
set -u
cd "$(dirname "$0")/.."
baseline="${1:?usage: bench/side_by_side.sh COMMIT ROUNDS SCRIPT [ARGS...]}"
rounds="${2:?usage: bench/side_by_side.sh COMMIT ROUNDS SCRIPT [ARGS...]}"
shift 2
source bench/baseline_tree.sh
for round in $(seq "$rounds"); do
  for tree in "$base" "$here"; do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    start=$(date +%s.%N)
    said="$(cd "$tree" && HF_HUB_OFFLINE=1 DATEEVAL_CACHE="$here/cache" DATEEVAL_SHARED="${DATEEVAL_SHARED:-$here/../shared}" \
      "$here/.venv/bin/python" "$@" 2>&1)" || said="FAILED: $said"
    printf '== round %s %s: %.1f s wall, load before %s, after %s\n%s\n' "$round" "$(tree_name "$tree")" "$(echo "$(date +%s.%N) - $start" | bc)" \
      "$load" "$(cut -d' ' -f1 /proc/loadavg)" "$(tail -n 25 <<<"$said")"
  done
done

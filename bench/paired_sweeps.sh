#!/usr/bin/env bash
# Paired timing of two sweeps (generation: gsm8k 4*SCALE items x 2 dates x 48 tokens; scoring: mmlu 24*SCALE items x
# 2 dates) with the code at a baseline commit and at the working tree, alternating, fresh stores, the same .venv:
#   bench/paired_sweeps.sh b6c610e [rounds] [scale]
# Prints one line per run (tree, kind, wall seconds with the start-up, the sweep's own "scored in" seconds, load):
# compare the two trees within a round.
set -u
cd "$(dirname "$0")/.."
baseline="${1:?usage: bench/paired_sweeps.sh COMMIT [rounds]}"
rounds="${2:-2}"
scale="${3:-1}"
source bench/baseline_tree.sh
data="${DATEEVAL_SHARED:-$here/../shared}/data"
for round in $(seq "$rounds"); do
  for tree in "$base" "$here"; do
    for kind in gen score; do
      store="$(mktemp -d)"
      if [ "$kind" = gen ]; then args=(--dataset gsm8k --limit $((4 * scale)) --max-new-tokens 48); else args=(--dataset mmlu --limit $((24 * scale))); fi
      start=$(date +%s.%N)
      said="$(cd "$tree" && HF_HUB_OFFLINE=1 PYTHONPATH="$tree" DATEEVAL_CACHE="$here/cache" "$here/.venv/bin/python" -m dateeval run "${args[@]}" \
        --data-dir "$data" --dates 2024-01-01,2024-06-15 --dtype float32 --store "$store/s" 2>/dev/null)" || echo "FAILED $tree $kind"
      end=$(date +%s.%N)
      printf 'round %s %s %s %.1f s (sweep %s) load %s\n' "$round" "$(tree_name "$tree")" "$kind" \
        "$(echo "$end - $start" | bc)" "$(grep -o 'scored in [0-9.]*s' <<<"$said" | cut -d' ' -f3)" "$(cut -d' ' -f1 /proc/loadavg)"
      rm -rf "$store"
    done
  done
done

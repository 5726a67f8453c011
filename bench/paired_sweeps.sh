#!/usr/bin/env bash
# Paired timing of two small sweeps (generation: gsm8k 4 items x 2 dates x 48 tokens; scoring: mmlu anatomy 24 items x
# 2 dates) with the code at a baseline commit and at the working tree, alternating, fresh stores, the same .venv:
#   bench/paired_sweeps.sh b6c610e [rounds]
# Prints one line per run (tree, kind, seconds, load): compare the two trees within a round.
set -u
cd "$(dirname "$0")/.."
baseline="${1:?usage: bench/paired_sweeps.sh COMMIT [rounds]}"
rounds="${2:-2}"
here="$(pwd)"
base="$(mktemp -d)/base"
git worktree add -q --detach "$base" "$baseline"
trap 'git worktree remove --force "$base"' EXIT
data="${DATEEVAL_SHARED:-$here/../shared}/data"
for round in $(seq "$rounds"); do
  for tree in "$base" "$here"; do
    for kind in gen score; do
      store="$(mktemp -d)"
      if [ "$kind" = gen ]; then args=(--dataset gsm8k --limit 4 --max-new-tokens 48); else args=(--dataset mmlu --subjects anatomy --limit 24); fi
      start=$(date +%s.%N)
      (cd "$tree" && HF_HUB_OFFLINE=1 PYTHONPATH="$tree" DATEEVAL_CACHE="$here/cache" "$here/.venv/bin/python" -m dateeval run "${args[@]}" \
        --data-dir "$data" --dates 2024-01-01,2024-06-15 --dtype float32 --store "$store/s" >/dev/null 2>&1) || echo "FAILED $tree $kind"
      end=$(date +%s.%N)
      printf 'round %s %s %s %.1f s load %s\n' "$round" "$([ "$tree" = "$here" ] && echo working-tree || echo "$baseline")" "$kind" \
        "$(echo "$end - $start" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
      rm -rf "$store"
    done
  done
done

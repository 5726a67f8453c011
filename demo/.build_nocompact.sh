#!/usr/bin/env bash
# Rebuilds the built-in demo store with the project's own CLI (about an hour on 2 CPU cores).
# The default model (SmolLM2-135M-Instruct, shipped as GGUF Q4_1 and de-quantised) under three
# precisions, i.e. three honest leaderboard entries, on a seeded 20-question sample of MMLU's test
# split, over all 366 dates of 2024 plus the no-date baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR="${DATA_DIR:-../shared/data}"
STORE="${STORE:-demo/store}"
for dtype in bfloat16 float32 float16; do
  .venv/bin/python -m dateeval run --model smollm2-135m --dataset mmlu --data-dir "$DATA_DIR" \
    --sample 20 --seed 0 --dates 2024-01-01..2024-12-31 --no-date --dtype "$dtype" --batch-size 8 --store "$STORE"
done

#!/usr/bin/env bash
# Rebuilds the built-in demo store with the project's own CLI (about 90 minutes on 2 CPU cores).
# Next-token MCQA: the default model (SmolLM2-135M-Instruct, shipped as GGUF Q4_1 and de-quantised)
# under three precisions, i.e. three honest leaderboard entries, on a seeded 20-question sample of
# MMLU's test split, over all 366 dates of 2024 plus the no-date baseline.
# Open-ended tasks (bfloat16, greedy): the first day of every month of 2024 plus the no-date
# baseline, on 16 GSM8K problems, 16 HumanEval problems, 16 chain-of-thought MMLU questions (the
# same seeded sample's first 16) and 24 WMT16 English-German segments. Outputs are stored verbatim.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR="${DATA_DIR:-../shared/data}"
STORE="${STORE:-demo/store}"
for dtype in bfloat16 float32 float16; do
  .venv/bin/python -m dateeval run --model smollm2-135m --dataset mmlu --data-dir "$DATA_DIR" \
    --sample 20 --seed 0 --dates 2024-01-01..2024-12-31 --no-date --dtype "$dtype" --batch-size 8 --store "$STORE"
done
MONTHLY=(--dates 2024-01-01..2024-12-01/1m --no-date --dtype bfloat16 --batch-size 16 --data-dir "$DATA_DIR" --store "$STORE")
.venv/bin/python -m dateeval run --dataset gsm8k --limit 16 --max-new-tokens 256 "${MONTHLY[@]}"
.venv/bin/python -m dateeval run --dataset humaneval --limit 16 --max-new-tokens 256 "${MONTHLY[@]}"
.venv/bin/python -m dateeval run --dataset mmlu_cot --sample 20 --seed 0 --limit 16 --max-new-tokens 256 "${MONTHLY[@]}"
.venv/bin/python -m dateeval run --dataset wmt16_en_de --limit 24 --max-new-tokens 96 "${MONTHLY[@]}"
.venv/bin/python -m dateeval compact --store "$STORE"

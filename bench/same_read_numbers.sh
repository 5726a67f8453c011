#!/usr/bin/env bash
# Do the read-side commands print the same numbers as at another commit? Runs summary (text, --json, --json --dates),
# robust (text, --json, --markdown, --latex), compare, export and report on a read-only copy of the demo store, with
# this checkout and with REF's (extracted by `git archive`, nothing checked out), and compares byte for byte (the
# report's time stamp and plotly's random element ids aside). Exit status 1 on any difference.
#   bench/same_read_numbers.sh 4fbecf1
set -euo pipefail
cd "$(dirname "$0")/.."
REF="${1:?usage: bench/same_read_numbers.sh REF}"
WORK="$(mktemp -d)"
trap 'chmod -R u+w "$WORK"; rm -rf "$WORK"' EXIT
cp -r demo/store "$WORK/store" && rm -rf "$WORK/store/.aggregates" && chmod -R a-w "$WORK/store"
mkdir "$WORK/ref" && git archive "$REF" | tar -x -C "$WORK/ref"
export HF_HUB_OFFLINE=1
PYTHON="$PWD/.venv/bin/python"

outputs() {  # $1: a checkout, $2: where its outputs go
  local S="$WORK/store" run=(nice -n 19 env PYTHONPATH="$1" "$PYTHON" -m dateeval)
  mkdir -p "$2" && cd "$1"
  "${run[@]}" summary --store "$S" > "$2/summary.txt"
  "${run[@]}" summary --store "$S" --json > "$2/summary.json"
  "${run[@]}" summary --store "$S" --json --dates 2024-03-01..2024-06-30 > "$2/summary-dates.json"
  for form in "" --json --markdown --latex; do "${run[@]}" robust --store "$S" $form > "$2/robust$form.txt"; done
  "${run[@]}" compare --store "$S" "smollm2-135m (float32, cpu)" "smollm2-135m (bfloat16, cpu)" > "$2/compare.txt"
  "${run[@]}" export --store "$S" --out "$2/export.csv" > /dev/null
  "${run[@]}" report --store "$S" --out "$2/report" > /dev/null
  sed -E -i "s/written [0-9-]+ [0-9:]+\./written X./; s/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}/ID/g" "$2/report/index.html"
  cd - > /dev/null
}

outputs "$WORK/ref" "$WORK/before"
outputs "$PWD" "$WORK/after"
diff -r "$WORK/before" "$WORK/after" && echo "same: summary, robust, compare, export and report print what $REF prints"

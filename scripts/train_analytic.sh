#!/usr/bin/env bash
# Train the policies shipped in policies/analytic/ (fixed seeds; the same command gives the same files).
#   bash scripts/train_analytic.sh            # all budgets
#   STEPS="3" bash scripts/train_analytic.sh  # one budget
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${STEPS:-3 5}"
ITERS="${ITERS:-200}"
OUT="${OUT:-policies/analytic}"
common=(--backbone analytic --reward geneval --suite geneval --iters "$ITERS" --contexts 16 --samples 4 --seed 0 --no-progress)
for n in $STEPS; do
  for spec in "global js global" "js js instance" "js-prompt js prompt" "rloo rloo instance" "xctx xctx instance"; do
    read -r name baseline kind <<<"$spec"
    dir="$OUT/$name-n$n"
    rm -rf "$dir"
    echo "== $dir"
    jsbench train "${common[@]}" --steps "$n" --baseline "$baseline" --policy "$kind" --out "$dir"
    rm -f "$dir/checkpoint.pt"  # the shipped artefact is the policy + manifest + training log
  done
done

#!/usr/bin/env bash
# Train the policies shipped in policies/<backbone>/ (fixed seeds; the same command gives the same files).
#   bash scripts/train_policies.sh                        # analytic, all budgets, all five policies
#   STEPS="3" bash scripts/train_policies.sh              # one budget
#   bash scripts/train_policies.sh scenes-dit             # the learned backbone (ITERS, POLICIES as below)
#   POLICIES="js rloo" bash scripts/train_policies.sh     # a subset
set -euo pipefail
cd "$(dirname "$0")/.."
BACKBONE="${1:-analytic}"
STEPS="${STEPS:-3 5}"
ITERS="${ITERS:-200}"
OUT="${OUT:-policies/$BACKBONE}"
POLICIES="${POLICIES:-global js js-prompt rloo xctx}"
common=(--backbone "$BACKBONE" --reward geneval --suite geneval --iters "$ITERS" --contexts 16 --samples 4 --seed 0 --no-progress)
declare -A spec=([global]="js global" [js]="js instance" [js-prompt]="js prompt" [rloo]="rloo instance" [xctx]="xctx instance")
for n in $STEPS; do
  for name in $POLICIES; do
    read -r baseline kind <<<"${spec[$name]}"
    dir="$OUT/$name-n$n"
    rm -rf "$dir"
    echo "== $dir"
    jsbench train "${common[@]}" --steps "$n" --baseline "$baseline" --policy "$kind" --out "$dir"
    rm -f "$dir/checkpoint.pt"  # the shipped artefact is the policy + manifest + training log
  done
done

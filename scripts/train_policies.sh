#!/usr/bin/env bash
# Train the policies shipped in policies/<backbone>/<name>-n<steps>/seed<S>/: every learned row is the mean of
# several training seeds. Each run's manifest records the one command that repeats it (one CPU thread: float
# sums depend on the thread count), so the same command gives the same files.
#   bash scripts/train_policies.sh                        # analytic: both budgets (3 steps 2400 updates, 5 steps 400),
#                                                         # five policies, seeds 0-7
#   bash scripts/train_policies.sh detail                 # the positive control (3 steps, 2000 updates, seeds 0-7)
#   bash scripts/train_policies.sh scenes-dit             # the learned backbone (3 steps, 100 updates, seeds 0-7)
#   STEPS="3" SEEDS="0" POLICIES="js rloo" JOBS=2 bash scripts/train_policies.sh   # a subset, two at a time
#   SUITE=ocr JOBS=2 bash scripts/train_policies.sh       # analytic's text world, OCR reward: <backbone>/ocr-<name>-n<steps>/
#   RESUME=1 ... bash scripts/train_policies.sh           # after an interruption: a run whose checkpoint is of this update
#                                                         # count goes on from it (the same files as an uninterrupted run),
#                                                         # a finished run of this count is kept, any other starts again;
#                                                         # a checkpoint that does not load is kept and its run fails
# Updates per backbone are where the held-out score has stopped moving (manifest "convergence", from the run's
# heldout.jsonl: jsbench/policy/convergence.py; a row's verdict is its seeds' averaged curve's); every row of a
# backbone gets the same count (OCR, and GenEval on analytic: of a budget).
set -euo pipefail
cd "$(dirname "$0")/.."
BACKBONE="${1:-analytic}"
SUITE="${SUITE:-geneval}"  # the suite whose training prompts and reward (same name) train the rows
declare -A default_steps=([analytic]="3 5" [detail]="3" [scenes-dit]="3")
declare -A default_iters=([analytic]=400 [detail]=2000 [scenes-dit]=100)
declare -A default_policies=([analytic]="global js js-prompt rloo xctx" [detail]="global js js-prompt rloo" [scenes-dit]="global js rloo xctx")
declare -A suite_steps=([ocr]="3 5")
STEPS="${STEPS:-${suite_steps[$SUITE]:-${default_steps[$BACKBONE]:-3}}}"
# OCR: 1.0-1.7 CPU-s an update on analytic (rapidocr reads every sample), so its counts are per budget: every row of
# a budget gets the same count (rows compare as methods within a budget, not across); at 3 steps global's held-out
# accuracy still rises at 400 updates (0.0185 a quarter, SE 0.0042) and is flat over 300-600
declare -A suite_iters=([ocr-3]=600 [ocr-5]=300)
declare -A suite_policies=([ocr]="global js rloo xctx")
# GenEval on analytic: the 3-step rows' held-out score settles only past update ~1600 (global-n3 dips to 0.82 near
# update 400 and climbs back to 0.99), so that budget gets its own count; 5 steps settle within 400
declare -A budget_iters=([analytic-3]=2400)
iters_for() {  # a row's update count at $1 steps: ITERS if set, else its budget's (OCR: per suite; GenEval: per
               # backbone), else its backbone's
  if [ "$SUITE" = geneval ]; then
    echo "${ITERS:-${budget_iters[$BACKBONE-$1]:-${default_iters[$BACKBONE]:-200}}}"
  else
    echo "${ITERS:-${suite_iters[$SUITE-$1]:-${default_iters[$BACKBONE]:-200}}}"
  fi
}
POLICIES="${POLICIES:-${suite_policies[$SUITE]:-${default_policies[$BACKBONE]:-global js rloo}}}"
PREFIX=""
[ "$SUITE" = geneval ] || PREFIX="$SUITE-"
# training seeds are independent (each its own init, contexts and noise stream); 8 where a run is cheap
declare -A default_seeds=([analytic]="0 1 2 3 4 5 6 7" [detail]="0 1 2 3 4 5 6 7" [scenes-dit]="0 1 2 3 4 5 6 7")
declare -A suite_seeds=([ocr]="0 1 2 3 4 5 6 7")
SEEDS="${SEEDS:-${suite_seeds[$SUITE]:-${default_seeds[$BACKBONE]:-0 1 2}}}"
JOBS="${JOBS:-1}"
OUT="${OUT:-policies/$BACKBONE}"
declare -A spec=([global]="js global" [js]="js instance" [js-prompt]="js prompt" [rloo]="rloo instance" [xctx]="xctx instance" [tpdm]="js tpdm" [indis]="js indis")
runs=()
for n in $STEPS; do
  for name in $POLICIES; do
    read -r baseline kind <<<"${spec[$name]}"
    for seed in $SEEDS; do
      runs+=("$OUT/$PREFIX$name-n$n/seed$seed $n $baseline $kind $seed $(iters_for "$n")")
    done
  done
done
train_one() {
  read -r dir n baseline kind seed iters <<<"$1"
  local resume=() verdict=0
  if [ "${RESUME:-0}" = 1 ] && [ -f "$dir/checkpoint.pt" ]; then
    # 0: a checkpoint of this very run (its update count, not past it); 3: of a run of another count; else unreadable
    python -c "import sys, torch; s = torch.load(sys.argv[1], map_location='cpu', weights_only=True); n = int(sys.argv[2]); sys.exit(0 if s['config']['iters'] == n and s['iteration'] <= n else 3)" \
      "$dir/checkpoint.pt" "$iters" || verdict=$?
    case "$verdict" in
      0) resume=(--resume) ;;
      3) rm -rf "$dir" ;;  # going on would not give this run's files (its held-out points follow the count): start again
      *) echo "== $dir: its checkpoint does not load (exit $verdict); kept, not trained: delete it to start again" >&2
         return 1 ;;
    esac
  elif [ "${RESUME:-0}" = 1 ] && [ -f "$dir/manifest.json" ] \
       && python -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))['train']['iters'] != int(sys.argv[2]))" "$dir/manifest.json" "$iters"; then
    echo "== $dir kept (finished, $iters updates)"
    return
  else
    rm -rf "$dir"
  fi
  mkdir -p "$(dirname "$dir")"
  if ! OMP_NUM_THREADS=1 jsbench train "${resume[@]}" --backbone "$BACKBONE" --reward "$SUITE" --suite "$SUITE" --iters "$iters" \
       --contexts 16 --samples 4 --seed "$seed" --threads 1 --no-progress \
       --steps "$n" --baseline "$baseline" --policy "$kind" --out "$dir" >/dev/null; then
    echo "== $dir FAILED or interrupted: its checkpoint, if it has one, is kept (RESUME=1 goes on from it)" >&2
    return 1  # xargs runs the others, then exits non-zero, and so does this script
  fi
  rm -f "$dir/checkpoint.pt"  # finished: the shipped artefact is the policy + manifest + training log + held-out curve
  echo "== $dir $(python -c "import json,sys; from jsbench.policy.convergence import VERDICT_WORDS; c=json.load(open(sys.argv[1]))['convergence']; v=c['converged']; print(VERDICT_WORDS[v], *(('held-out rise/quarter', round(c['rise'], 4), 'se', round(c['se'], 4)) if v is not None else (c.get('reason', ''),)))" "$dir/manifest.json")"
}
export -f train_one
export BACKBONE SUITE RESUME
printf '%s\n' "${runs[@]}" | xargs -P "$JOBS" -I{} bash -c 'train_one "$@"' _ {}

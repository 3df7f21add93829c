#!/usr/bin/env bash
# The real backbones at full size on one GPU (issue 40): one call, one JSON, at most 8 minutes on an H200.
#
#   bash scripts/gpu_day_one.sh [OUT.json]          # CUDA, bf16; default bench/results/gpu_day_one.json
#   bash scripts/gpu_day_one.sh --cpu [OUT.json]    # dry run on a CPU (tiny pipelines, full size on meta), < 1 min
#   FAMILIES="sdxl flux-dev" bash scripts/gpu_day_one.sh ...   # only these families (default: all five)
#
# 1. probe: $PYTHON (default python3) runs, imports torch and (without --cpu) sees a CUDA device;
# 2. packages: what the image lacks (diffusers, importlib-metadata, rapidfuzz) is installed offline from the
#    wheels in .whl/ that `bash scripts/gpu_wheels.sh` fetched beforehand on a machine with network access,
#    --no-deps into a folder of its own put first on PYTHONPATH, so the image's torch, transformers,
#    accelerate and huggingface-hub stay as they are; then every import is checked, failing in one line;
# 3. scripts/gpu_day_one.py: per family (sdxl, sd35-medium, sd35-large, flux-dev, flux-schnell) with
#    `--model full-size-random`, seconds per step at batch 1 ... the largest that fits, seconds per image,
#    the VAE decode, the xattn policy's forward+backward and share, peak memory per offload mode; then a
#    2-update `jsbench train` and a 4-image `jsbench eval` through the CLI. Its stages stop at a 400 s budget
#    (what is left is skipped and named in the JSON); the whole step is killed at 450 s.
# Exits non-zero if the probe, the packages or any stage fails. Nothing is downloaded (HF_HUB_OFFLINE=1).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-python3}
CPU=0
OUT=
for arg in "$@"; do
    case "$arg" in
        --cpu) CPU=1 ;;
        -*) echo "gpu_day_one: unknown option $arg (use: [--cpu] [OUT.json])" >&2; exit 2 ;;
        *) [ -z "$OUT" ] || { echo "gpu_day_one: one OUT.json, got '$OUT' and '$arg'" >&2; exit 2; }; OUT=$arg ;;
    esac
done
if [ -z "$OUT" ]; then
    if [ "$CPU" = 1 ]; then OUT=${TMPDIR:-/tmp}/gpu_day_one.cpu.json; else OUT=bench/results/gpu_day_one.json; fi
fi
start=$(date +%s)
fail() {
    echo "gpu_day_one: FAILED after $(( $(date +%s) - start ))s: $*" >&2
    exit 1
}

echo "== 1/3 probe"
"$PY" -c 'import torch; print("torch", torch.__version__)' || fail "cannot run '$PY' with torch (set PYTHON=/path/to/python)"
if [ "$CPU" = 0 ]; then
    "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
        || fail "no CUDA device: torch.cuda.is_available() is False (the dry run is: bash $0 --cpu)"
fi

echo "== 2/3 packages"
missing=$("$PY" -c 'from importlib.util import find_spec
print(" ".join(n for n in ("diffusers", "importlib_metadata", "rapidfuzz") if find_spec(n) is None))')
if [ -n "$missing" ]; then
    [ "$CPU" = 0 ] || fail "missing packages: $missing (the dry run installs nothing)"
    ls .whl/*.whl >/dev/null 2>&1 || fail "missing packages: $missing, and no wheels in .whl/ (run bash scripts/gpu_wheels.sh where there is network)"
    SITE=${TMPDIR:-/tmp}/jsbench-gpu-site
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        || fail "installing the wheels of .whl/ into $SITE"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import diffusers, transformers, accelerate, safetensors, rapidfuzz, typer, rich, jsbench.cli
print("diffusers", diffusers.__version__, "transformers", transformers.__version__, "accelerate", accelerate.__version__)' 2>/dev/null \
    || fail "imports: $("$PY" -c 'import diffusers, transformers, accelerate, safetensors, rapidfuzz, typer, rich, jsbench.cli' 2>&1 | tail -n 1)"

echo "== 3/3 $([ "$CPU" = 1 ] && echo "dry run on the CPU" || echo "full size on CUDA (bf16)")"
# shellcheck disable=SC2086  # FAMILIES is a list of words
timeout 450 "$PY" scripts/gpu_day_one.py --out "$OUT" --budget 400 $([ "$CPU" = 1 ] && echo --cpu) \
    ${FAMILIES:+--families $FAMILIES} \
    || fail "scripts/gpu_day_one.py (exit $?): see the stages above and $OUT"
echo "gpu_day_one: passed in $(( $(date +%s) - start ))s; wrote $OUT"

#!/usr/bin/env bash
# The GPU check of the real-backbone path (issue 12): one call, sized for a 15-minute GPU lease.
#
#   bash scripts/gpu_smoke.sh [OUT.json]        # default bench/results/gpu_smoke.json
#
# 1. probe: $PYTHON (default python) runs, imports torch and sees a CUDA device;
# 2. packages: diffusers installed offline from wheels in .whl/ (git ignores it), made beforehand on a
#    machine with network access, for the GPU image's Python (3.X), WITHOUT dependencies:
#      pip download --no-deps --only-binary=:all: --python-version 3.X --platform manylinux2014_x86_64 \
#          -d .whl diffusers==0.42.1 importlib-metadata zipp
#    and installed with --no-deps, so nothing in .whl/ can replace the image's torch, transformers,
#    accelerate or huggingface-hub (a newer huggingface-hub pulled in by diffusers breaks transformers).
#    The image has torch, transformers, accelerate, safetensors, huggingface-hub, requests, regex, numpy,
#    Pillow, typer, rich, matplotlib; no scipy, no network. Their versions are printed and kept in the JSON;
# 3. scripts/gpu_smoke.py on CUDA in bf16: parity of the four tiny families with their pipelines, 3 training
#    updates and one policy eval per family at the real latent shapes with chunked decoding, per-row vs
#    shared-schedule cost, the policy's share of sampling time, peak memory per image, the real VAEs'
#    decode memory at 1024^2, --offload; one JSON (OUT).
# Exits non-zero if the probe or any stage fails. Nothing is downloaded (HF_HUB_OFFLINE=1).
# `python scripts/gpu_smoke.py --cpu` runs stage 3 at toy sizes on a CPU (tests/test_gpu_path.py does).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-python}
OUT=${1:-bench/results/gpu_smoke.json}
start=$(date +%s)

fail() {
    echo "gpu_smoke: FAILED after $(( $(date +%s) - start ))s: $*" >&2
    exit 1
}

echo "== 1/3 probe"
"$PY" -c 'import torch; print("torch", torch.__version__)' || fail "cannot run '$PY' with torch (set PYTHON=/path/to/python)"
"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || fail "no CUDA device: torch.cuda.is_available() is False (the CPU dry run is: $PY scripts/gpu_smoke.py --cpu)"

echo "== 2/3 packages"
versions() {
    "$PY" -c 'import importlib.metadata as m
for name in ("torch", "transformers", "accelerate", "huggingface-hub", "safetensors", "diffusers"):
    try:
        print(name, m.version(name), end="  ")
    except m.PackageNotFoundError:
        print(name, "-", end="  ")
print()'
}
before=$(versions)
echo "image: $before"
if ! "$PY" -c 'import diffusers' 2>/dev/null; then
    [ -d .whl ] || fail "diffusers is not installed and there is no .whl/ folder of wheels (see the pip download line at the top of $0)"
    # --no-deps: the image's torch / transformers / accelerate / huggingface-hub stay exactly as they are
    "$PY" -m pip install --no-index --no-deps --find-links .whl diffusers importlib-metadata zipp \
        || fail "installing diffusers from .whl/"
fi
after=$(versions)
[ "${before% diffusers*}" = "${after% diffusers*}" ] || fail "installing diffusers changed the image's packages: $before -> $after"
"$PY" -c 'import diffusers, transformers, accelerate, safetensors; print("diffusers", diffusers.__version__, "transformers", transformers.__version__)' \
    || fail "diffusers, transformers, accelerate and safetensors must import"

echo "== 3/3 checks on CUDA (bf16)"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
timeout 480 "$PY" scripts/gpu_smoke.py --out "$OUT" || fail "scripts/gpu_smoke.py (exit $?): see the stages above and $OUT"
echo "gpu_smoke: passed in $(( $(date +%s) - start ))s; wrote $OUT"

#!/usr/bin/env bash
# Fetch the wheels the GPU image lacks into .whl/ (git ignores it), on a machine WITH network access: the GPU
# machine has none. scripts/gpu_day_one.sh (and gpu_smoke.sh) install them there offline, --no-deps, into a
# folder of their own, so nothing here can replace the image's torch, transformers, accelerate or
# huggingface-hub.
#
#   bash scripts/gpu_wheels.sh [DEST]          # default .whl
#
# The image (docs: the device's package list; Python 3.12) has torch, transformers, accelerate, safetensors,
# huggingface-hub, typer, rich, numpy, scipy, Pillow, matplotlib, regex, requests, filelock and zipp. Missing:
#   diffusers            the pipelines (its other needs, listed by its METADATA, are all in the image)
#   importlib-metadata   a need of diffusers the image lacks
#   rapidfuzz            a need of jsbench (jsbench/scoring/text.py, imported by the CLI's suites)
# Versions are pinned to the ones jsbench is tested with; override with DIFFUSERS=... etc.
set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-python3}
DEST=${1:-.whl}
DIFFUSERS=${DIFFUSERS:-0.42.1}
IMPORTLIB_METADATA=${IMPORTLIB_METADATA:-10.2.0}
RAPIDFUZZ=${RAPIDFUZZ:-3.14.6}
WANT=("diffusers==$DIFFUSERS" "importlib-metadata==$IMPORTLIB_METADATA" "rapidfuzz==$RAPIDFUZZ")

"$PY" -m pip --version >/dev/null 2>&1 || { echo "gpu_wheels: '$PY -m pip' does not run (set PYTHON=/path/to/python)" >&2; exit 2; }
mkdir -p "$DEST"
# the GPU image's interpreter: CPython 3.12 on x86-64 Linux; pip matches each manylinux tag exactly, so several
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi none --abi abi3 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
    -d "$DEST" "${WANT[@]}" || { echo "gpu_wheels: pip download failed (network? versions: ${WANT[*]})" >&2; exit 1; }
# one version of each: two make the offline install refuse
for name in diffusers importlib_metadata rapidfuzz; do
    n=$(find "$DEST" -maxdepth 1 -iname "${name}-*.whl" | wc -l)
    [ "$n" -eq 1 ] || { echo "gpu_wheels: $DEST holds $n wheels of $name; keep one (remove the others)" >&2; exit 1; }
done
echo "gpu_wheels: $(find "$DEST" -maxdepth 1 -name '*.whl' | wc -l) wheels in $DEST ($(du -sh "$DEST" | cut -f1)): ${WANT[*]}"

#!/usr/bin/env bash
# GPU smoke check of the real backbones, one command, under 5 minutes on a CUDA machine:
#   1. each backbone (sdxl, sd35, flux-dev, flux-schnell) on its tiny random-weight pipeline in bf16,
#      and on real weights where they are already cached (or given as NAME=PATH arguments), with a
#      different schedule per row; prints load time, per-step latency and peak CUDA memory;
#   2. the parity tests (our batched sampler vs the diffusers pipelines) on CUDA in bf16.
# Without CUDA it says so and exits 0. Nothing is downloaded (HF_HUB_OFFLINE=1).
#
#   scripts/gpu_smoke.sh                         # tiny + cached real models
#   scripts/gpu_smoke.sh --no-real               # tiny only
#   scripts/gpu_smoke.sh flux-dev=/data/FLUX.1-dev
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu_smoke: no CUDA device (torch.cuda.is_available() is False); nothing to check here."
    exit 0
fi

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
status=0

echo "== 1/2 backbones on CUDA (bf16): tiny pipelines, then cached real weights"
timeout 200 "$PY" scripts/gpu_smoke.py --budget 170 "$@" || status=1

echo "== 2/2 parity tests on CUDA (bf16)"
JSBENCH_TEST_DEVICE=cuda timeout 90 "$PY" -m pytest -q -x -p no:cacheprovider \
    tests/test_backbone_parity.py tests/test_backbone_loading.py || status=1

echo "gpu_smoke: $([ $status -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start ))s"
exit $status

#!/usr/bin/env bash
# Builds a side venv with real mmdet 2.27.0 / mmcv-full 1.7.2 (torch 2.1.2) and writes the
# GenEval-detector fixtures under tests/fixtures/mmdet/ with scripts/mmdet_fixtures.py.
#   bash scripts/make_mmdet_fixtures.sh [VENV]     (VENV defaults to ../mmdet-venv; pip needs PyPI)
# MMCV_OPS=1 (default) compiles mmcv-full's C++ ops (~15 min on 2 idle cores, MAX_JOBS=2; hours on a
# loaded machine). MMCV_OPS=0 installs mmcv-full's Python code only, with an `mmcv._ext` whose functions
# refuse to run: mmdet imports the ops but its CPU inference of Mask2Former calls none of them
# (MultiScaleDeformableAttention takes mmcv's pure-PyTorch path off CUDA), so the fixtures are the same.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$repo/../mmdet-venv}
build=$venv/build
ops=${MMCV_OPS:-1}
py=${PYTHON:-python3.11}
if [ ! -x "$venv/bin/python" ]; then "$py" -m venv "$venv"; fi
pip="$venv/bin/python -m pip"
if ! "$venv/bin/python" -c "import mmdet, mmcv.ops" 2>/dev/null; then
  mkdir -p "$build"
  $pip install torch==2.1.2 'setuptools<70' wheel ninja 'numpy<2'
  $pip install --no-deps torchvision==0.16.2
  $pip install 'numpy<2' 'opencv-python-headless<4.11' yapf==0.40.1 addict packaging pyyaml termcolor \
               regex pycocotools terminaltables scipy six matplotlib safetensors pillow requests
  if [ ! -d "$build/mmcv-full-1.7.2" ]; then
    (cd "$build" && $pip download --no-deps --no-binary :all: --no-build-isolation mmcv-full==1.7.2 \
      && tar xzf mmcv-full-1.7.2.tar.gz)
  fi
  if [ "$ops" = 1 ]; then
    (cd "$build/mmcv-full-1.7.2" && MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-2} \
       $pip wheel --no-build-isolation --no-deps -w "$build" . && $pip install --no-deps "$build"/mmcv_full-1.7.2-*.whl)
  else
    (cd "$build/mmcv-full-1.7.2" && MMCV_WITH_OPS=0 $pip install --no-build-isolation --no-deps .)
    site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    cat > "$site/mmcv/_ext.py" <<'PY'
"""Stand-in for mmcv-full's compiled ops (MMCV_OPS=0): importable, and any call refuses."""


def __getattr__(name):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"mmcv._ext.{name}: this mmcv was installed without its compiled ops")

    return refuse
PY
  fi
  $pip install --no-deps mmdet==2.27.0
fi
"$venv/bin/python" -c "import mmdet, mmcv, mmcv.ops, torch; print('mmdet', mmdet.__version__, 'mmcv', mmcv.__version__, 'torch', torch.__version__)"
"$venv/bin/python" "$repo/scripts/mmdet_fixtures.py" --out "$repo/tests/fixtures/mmdet"

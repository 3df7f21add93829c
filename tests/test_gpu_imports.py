"""scripts/gpu_smoke.py on the GPU image (issue 23): torch, transformers, accelerate, safetensors and diffusers,
but no scipy and no OCR / CLIP extra. A subprocess refuses those imports and runs the smoke's import path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the extras the GPU image lacks; each name is refused at import time in the child process
ABSENT = ("scipy", "sklearn", "cv2", "easyocr", "paddleocr", "rapidocr_onnxruntime", "pytesseract", "onnxruntime",
          "open_clip", "clip", "hpsv2", "mmdet", "mmcv")

# `sys.modules[name] = None` is how Python marks a package absent: `import name` raises ModuleNotFoundError and
# importlib.util.find_spec(name) returns None (diffusers and transformers probe their optional extras that way)
_REFUSER = "import sys\nfor name in {absent!r}:\n    sys.modules[name] = None\n"


def _run(body: str, absent=ABSENT) -> subprocess.CompletedProcess:
    code = _REFUSER.format(absent=tuple(absent)) + textwrap.dedent(body)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_gpu_smoke_imports_without_scipy_or_extras():
    proc = _run(
        """
        import runpy
        try:
            import scipy  # noqa: F401
        except ModuleNotFoundError:
            pass
        else:
            raise SystemExit("the refuser let scipy through")
        smoke = runpy.run_path("scripts/gpu_smoke.py", run_name="gpu_smoke")  # every module-level import
        assert smoke["missing_packages"]() == [], smoke["missing_packages"]()
        # what the stages import lazily, and the tiny families they build
        import jsbench.evaluation.evaluate, jsbench.train.reinforce, jsbench.policy.schedule_policy  # noqa: E401,F401
        from diffusers import AutoencoderKL  # noqa: F401
        from jsbench.backbones import backbone_class
        from jsbench.backbones.tiny import TINY_KINDS, build_tiny_pipeline
        for kind in TINY_KINDS:
            assert backbone_class(kind) is not None, kind
        build_tiny_pipeline("flux-schnell", 0)
        assert sys.modules["scipy"] is None  # still refused: nothing above needed it
        print("imports ok")
        """
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "imports ok" in proc.stdout


def test_gpu_smoke_names_a_missing_package_in_one_line():
    proc = _run(
        """
        import runpy
        sys.argv = ["gpu_smoke.py", "--cpu", "--kinds"]
        runpy.run_path("scripts/gpu_smoke.py", run_name="__main__")
        """,
        absent=ABSENT + ("diffusers",),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing packages: diffusers" in lines[0], proc.stderr

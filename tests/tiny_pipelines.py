"""Test helpers for the real backbones: tiny pipelines written once per test session and loaded through
`load_backbone`, exactly as a user's `--model /path/to/pipeline` is.

Import from a test module (`from tiny_pipelines import tiny_backbone, ...`). The cache is per process
(module-level), not per pytest fixture, so several test modules share one set of folders and backbones.
Set JSBENCH_TEST_DEVICE=cuda to run the same tests on a GPU (bf16; see scripts/gpu_smoke.sh).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.backbones.tiny import TINY_KINDS, save_tiny_pipeline

__all__ = [
    "TINY_KINDS",
    "PROMPTS",
    "tiny_dir",
    "tiny_backbone",
    "test_device",
    "tolerance",
    "pipeline_kwargs",
    "one_thread",
    "tiny_backbones",
]

PROMPTS = ["a red cat", "two blue dogs next to a car", "a sign that says hello world"]


def test_device() -> str:
    return os.environ.get("JSBENCH_TEST_DEVICE", "cpu")


test_device.__test__ = False  # not a test, despite the name


@lru_cache(maxsize=None)
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="jsbench-tiny-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@lru_cache(maxsize=None)
def tiny_dir(kind: str) -> Path:
    """A `save_pretrained` folder holding the tiny pipeline for backbone `kind` (built once per process)."""
    return save_tiny_pipeline(kind, _root() / kind)


@lru_cache(maxsize=None)
def tiny_backbone(kind: str):
    """The backbone loaded from `tiny_dir(kind)` via the registry (shared: tests must not leave it modified)."""
    return load_backbone(kind, model=str(tiny_dir(kind)), device=test_device())


def tolerance(backbone, custom: bool = False) -> float:
    """Max abs difference allowed, relative to the reference's max magnitude.

    fp32: with the default schedule our loop issues the pipeline's own operations on the same batch, so
    the results are bit-identical (1e-6 leaves room for nothing but a platform quirk); custom schedules
    compare a batched row with a single-row pipeline call whose `sigmas=` went through the scheduler's
    float32 shift, so a few ulps remain (measured ~1e-6). bf16 (CUDA): a bf16 ulp is 0.4% and one
    flipped rounding compounds over steps and through CFG (measured <= 1.5% on CPU for custom rows).
    """
    if backbone.dtype == torch.float32:
        return 2e-5 if custom else 1e-6
    return 5e-2


def pipeline_kwargs(backbone, steps: int) -> dict:
    """Arguments that make `backbone.pipe(...)` sample what `backbone` samples (resolution, guidance, T5 length)."""
    kw = dict(height=backbone.height, width=backbone.width, num_inference_steps=steps, guidance_scale=backbone.guidance_scale)
    if backbone.name != "sdxl":
        kw["max_sequence_length"] = backbone.max_sequence_length
    return kw


@pytest.fixture(scope="module", autouse=False)
def one_thread():
    """Tiny networks gain nothing from intra-op threads, and on a shared, loaded CPU the threads'
    spin-waits cost 10-100x (measured: 10 s vs 0.1 s for a 4-step tiny SD-XL call). Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_backbones():
    """{kind: backbone} for every tiny pipeline, for tests that prefer a fixture to `tiny_backbone(kind)`."""
    return {kind: tiny_backbone(kind) for kind in TINY_KINDS}

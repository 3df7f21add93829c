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
from jsbench.backbones.tiny import TINY_KINDS, TINY_SAMPLING, save_tiny_pipeline

__all__ = [
    "TINY_KINDS",
    "PROMPTS",
    "tiny_dir",
    "tiny_backbone",
    "test_device",
    "tolerance",
    "pipeline_kwargs",
    "image_tolerance",
    "one_thread",
    "tiny_backbones",
    "tiny_defaults_dir",
    "tiny_mu_dir",
    "MU_TOKENS",
    "IMAGE_TOLERANCE_BF16",
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


#: Flux-Dev's image tokens at the tiny pipelines' 32 px (8 x 8 patches of the 16 x 16 latent grid)
MU_TOKENS = 64


@lru_cache(maxsize=None)
def tiny_mu_dir(kind: str) -> Path:
    """Like `tiny_dir`, but Flux-Dev's dynamic shift reaches mu = 1.15 (its 1024^2 value) at the tiny
    32 px token count, so the 1024^2 schedule runs at tiny cost (see `build_tiny_pipeline(mu_tokens=)`);
    the other kinds have no dynamic shift and are the `tiny_dir` folders."""
    if kind != "flux-dev":
        return tiny_dir(kind)
    return save_tiny_pipeline(kind, _root() / f"{kind}-mu", mu_tokens=MU_TOKENS)


@lru_cache(maxsize=None)
def tiny_defaults_dir(kind: str) -> Path:
    """The tiny pipeline with no sampling settings in jsbench.json: the adapter samples at its own defaults,
    which must be the pipeline's own __call__ defaults (resolution, steps, guidance, T5 length)."""
    return save_tiny_pipeline(kind, _root() / f"{kind}-defaults", sampling={})


@lru_cache(maxsize=None)
def tiny_backbone(kind: str):
    """The backbone loaded from `tiny_dir(kind)` via the registry (shared: tests must not leave it modified)."""
    return load_backbone(kind, model=str(tiny_dir(kind)), device=test_device())


def tolerance(backbone, custom: bool = False) -> float:
    """Max abs difference allowed on *latents*, relative to the reference's max magnitude.

    fp32: with the default schedule our loop issues the pipeline's own operations on the same batch, so
    the results are bit-identical (1e-6 leaves room for nothing but a platform quirk); custom schedules
    compare a batched row with a single-row pipeline call whose `sigmas=` went through the scheduler's
    float32 shift, so a few ulps remain (measured ~1e-6). bf16 (CUDA): a bf16 ulp is 0.4% and one
    flipped rounding compounds over steps and through CFG (measured <= 1.5% on CPU for custom rows).
    """
    if backbone.dtype == torch.float32:
        return 2e-5 if custom else 1e-6
    return 5e-2


#: Max abs difference (images in [0, 1]) between our decode of the pipeline's own final latents and the
#: pipeline's image, in bf16 (CUDA). Measured with `python scripts/parity_bounds.py` (tiny pipelines, CPU,
#: 4 steps, 3 prompts; bench/results/parity_bounds.json):
#:   - same latents, same batch: our decode equals the pipeline's bit for bit (0.0, fp32 and bf16, all four);
#:   - one ulp on every decoder input (bf16) moves images by up to 0.0156 (SD3.5), 0.0117 (Flux-Dev);
#:   - a dropped VAE shift_factor moves bf16 images by 0.0137 (Schnell) to 0.039 (SD3.5), fp32 by 0.0095+.
#: So images are compared on the *same* latents (an upstream rounding difference would need a tolerance
#: that hides a dropped shift_factor), in one decode call of the pipeline's batch size (same kernels on
#: CUDA), and the tolerance is one bf16 ulp of the output near 1 (2^-8 = 0.0039): above the measured 0,
#: 3.5x below the smallest dropped-shift change. test_gpu_path checks that it catches the drop.
IMAGE_TOLERANCE_BF16 = 2.0**-8


def image_tolerance(backbone) -> float:
    return 1e-5 if backbone.dtype == torch.float32 else IMAGE_TOLERANCE_BF16


def pipeline_kwargs(backbone, steps: int) -> dict:
    """The test harness's sampling settings for the reference `backbone.pipe(...)` call: the tiny resolution
    and T5 length written to jsbench.json (TINY_SAMPLING) and the step count. Nothing is read from the
    adapter: guidance and everything else are left at the pipeline's own __call__ defaults, so an adapter
    whose guidance (or T5 length, resolution) drifted from the pipeline's fails the parity tests."""
    kind = "flux-schnell" if backbone.name == "flux-schnell" else backbone.name
    return dict(TINY_SAMPLING[kind], num_inference_steps=steps)


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

"""jsbench.backbones.full_size: the real denoisers from their declared configs, one step's inputs (issue 27)."""

from __future__ import annotations

import pytest
import torch

from jsbench.backbones.full_size import FULL_SIZE, full_size, measure_denoiser_step

# published parameter counts of the denoisers (billions): SD-XL UNet 2.6, SD3.5 Medium 2.2 / Large 8.1, FLUX.1 11.9
PARAMS_B = {"sdxl": 2.57, "sd35": 2.24, "sd35-large": 8.06, "flux-dev": 11.90, "flux-schnell": 11.89}


@pytest.mark.parametrize("kind", sorted(FULL_SIZE))
def test_full_size_step_on_meta(kind):
    row = measure_denoiser_step(kind, "meta", torch.bfloat16)
    assert abs(row["params"] / 1e9 - PARAMS_B[kind]) < 0.01, row["params"]
    spec = full_size(kind)
    assert row["output_shape"] == [spec["cfg_batch"], *spec["latent"]]
    assert row["seconds_per_step"] is None and row["peak_gib"] is None  # timed and measured on CUDA only

"""Real backbones on tiny random-weight pipelines: protocol, parity with the diffusers pipelines, per-row schedules.

Parity is the point: our batched loop (one network call per step, a schedule per row) must produce what
the diffusers pipeline produces, (a) with the default schedule on every row, compared with one pipeline
call over the same batch, and (b) with a different schedule per row, each row compared with a single-row
pipeline call given that schedule (`sigmas=`, pre-compensated for the shift diffusers applies).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest
import torch

from jsbench.backbones import Backbone, Condition
from jsbench.backbones.sdxl_clock import flow_from_ve
from jsbench.schedule import (
    ScheduleError,
    check_sigmas,
    shift_sigmas,
    sigmas_from_increments,
    uniform_sigmas,
)

from tiny_pipelines import (
    PROMPTS,
    TINY_KINDS,
    image_tolerance,
    one_thread,
    pipeline_kwargs,
    tiny_backbone,
    tiny_defaults_dir,
    tiny_dir,
    tolerance,
)

pytestmark = pytest.mark.usefixtures("one_thread")

STEPS = 4
SEEDS = [11, 12, 13]


def _max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float().cpu(), b.float().cpu()
    return ((a - b).abs().max() / b.abs().max().clamp(min=1e-12)).item()


def _custom_sigmas(batch: int, steps: int, seed: int = 0) -> torch.Tensor:
    """Distinct random schedules, one per row, no step below 2% (deterministic in `seed`)."""
    inc = torch.from_numpy(np.random.default_rng(seed).dirichlet(np.full(steps, 1.5), size=batch))
    inc = 0.02 + (1 - 0.02 * steps) * inc
    return sigmas_from_increments(inc).to(torch.float32)


@pytest.fixture(params=TINY_KINDS)
def bb(request):
    return tiny_backbone(request.param)


def test_protocol_surface(bb):
    assert isinstance(bb, Backbone)
    x = bb.initial_noise(SEEDS)
    assert x.shape == (3, *bb.latent_shape)
    assert x.dtype == bb.dtype and x.device.type == bb.device.type
    cond = bb.encode(PROMPTS)
    assert isinstance(cond, Condition) and len(cond) == 3
    assert cond.pooled.shape == (3, bb.pooled_dim) and cond.pooled.dtype == torch.float32
    for name, t in cond.tensors.items():
        assert t.shape[0] == 3, name
    sig = bb.default_sigmas(STEPS, x)
    assert sig.shape == (3, STEPS + 1) and sig.dtype == torch.float32
    check_sigmas(sig)
    images = bb.sample(x, cond, sig)
    assert images.shape == (3, 3, bb.height, bb.width) and images.dtype == torch.float32
    assert 0.0 <= images.min().item() and images.max().item() <= 1.0


def test_initial_noise_is_per_seed_and_matches_pipeline_generators(bb):
    x = bb.initial_noise(SEEDS)
    assert torch.equal(bb.initial_noise([SEEDS[1]])[0], x[1])  # row depends on its seed only
    assert not torch.equal(x[0], x[1])
    # the pipeline drawing its own latents from one generator per row samples exactly our x_T
    gens = [torch.Generator().manual_seed(s) for s in SEEDS]
    ref = bb.pipe(PROMPTS, generator=gens, output_type="latent", **pipeline_kwargs(bb, STEPS)).images
    ours = bb.sample_latents(x, bb.encode(PROMPTS), bb.default_sigmas(STEPS, x))
    assert _max_rel(ours, ref) <= tolerance(bb)


def test_default_schedule_parity(bb):
    x = bb.initial_noise(SEEDS)
    cond = bb.encode(PROMPTS)
    sig = bb.default_sigmas(STEPS, x)
    lat = bb.sample_latents(x, cond, sig)
    kw = pipeline_kwargs(bb, STEPS)
    ref_lat = bb.pipe(PROMPTS, latents=x.clone(), output_type="latent", **kw).images
    assert _max_rel(lat, ref_lat) <= tolerance(bb)
    # the decoder on the *same* latents, in one call of the pipeline's batch size (see IMAGE_TOLERANCE_BF16)
    assert bb.decode_chunk >= len(PROMPTS)
    img = bb.decode(ref_lat)
    ref_img = bb.pipe(PROMPTS, latents=x.clone(), output_type="pt", **kw).images
    assert (img - ref_img.float()).abs().max().item() <= image_tolerance(bb)


def test_custom_schedule_per_row_matches_single_row_pipeline_calls(bb):
    x = bb.initial_noise(SEEDS)
    cond = bb.encode(PROMPTS)
    sig = _custom_sigmas(3, STEPS)
    assert not torch.allclose(sig[0], sig[1])
    lat = bb.sample_latents(x, cond, sig)
    kw = pipeline_kwargs(bb, STEPS)
    kw.pop("num_inference_steps")
    for b in range(3):
        ref = bb.pipe([PROMPTS[b]], latents=x[b : b + 1].clone(), sigmas=bb.pipeline_sigmas(sig[b]), output_type="latent", **kw).images
        assert _max_rel(lat[b : b + 1], ref) <= tolerance(bb, custom=True), f"row {b}"


def test_rows_do_not_interact(bb):
    """A row's result does not depend on the other rows' schedules (or on batch composition)."""
    x = bb.initial_noise(SEEDS)
    cond = bb.encode(PROMPTS)
    sig = _custom_sigmas(3, STEPS, seed=1)
    both = bb.sample_latents(x, cond, sig)
    alone = bb.sample_latents(x[1:2], cond.take([1]), sig[1:2])
    assert _max_rel(both[1:2], alone) <= tolerance(bb, custom=True)
    assert _max_rel(both[0:1], both[1:2]) > 1e-3  # different rows really differ


def test_condition_repeat_interleave_samples_repeats(bb):
    x = bb.initial_noise(SEEDS[:2])
    cond = bb.encode(PROMPTS[:2]).repeat_interleave(2)
    xs = x.repeat_interleave(2, dim=0)
    sig = bb.default_sigmas(2, xs)
    lat = bb.sample_latents(xs, cond, sig)
    assert cond.prompts == [PROMPTS[0], PROMPTS[0], PROMPTS[1], PROMPTS[1]]
    assert _max_rel(lat[0:1], lat[1:2]) <= tolerance(bb, custom=True)


def test_sample_rejects_invalid_schedules(bb):
    x = bb.initial_noise(SEEDS[:2])
    cond = bb.encode(PROMPTS[:2])
    bad = torch.tensor([[1.0, 0.3, 0.5, 0.0], [1.0, 0.6, 0.3, 0.0]])
    with pytest.raises(ScheduleError):
        bb.sample(x, cond, bad)
    with pytest.raises(ScheduleError):
        bb.sample(x, cond, uniform_sigmas(3, batch=3))
    start = torch.tensor([[0.9, 0.5, 0.0], [1.0, 0.5, 0.0]])
    if bb.clock_kind == "flow":  # flow time: a row may start below 1, x_T entering there (OSS's free start)
        assert bb.sample(x, cond, start).shape[0] == 2
        start = torch.tensor([[1.2, 0.5, 0.0], [1.0, 0.5, 0.0]])
    with pytest.raises(ScheduleError):
        bb.sample(x, cond, start)


# ---- the default schedules, checked against the formulas they are supposed to implement ----------------


def test_flux_dev_default_is_resolution_shifted_uniform_grid():
    bb = tiny_backbone("flux-dev")
    x = bb.initial_noise([0])
    cfg = bb.pipe.scheduler.config
    seq = x.shape[1]
    m = (cfg.max_shift - cfg.base_shift) / (cfg.max_image_seq_len - cfg.base_image_seq_len)
    mu = seq * m + cfg.base_shift - m * cfg.base_image_seq_len
    for n in (1, 4, 28):
        grid = torch.tensor(np.linspace(1.0, 1 / n, n), dtype=torch.float64)
        expected = torch.cat([shift_sigmas(grid, math.exp(mu)), torch.zeros(1, dtype=torch.float64)])
        torch.testing.assert_close(bb.default_sigmas(n, x)[0].cpu().double(), expected, atol=1e-6, rtol=0)
    # the shift depends on resolution: more image tokens, more shift (later sigmas larger)
    h, w = bb.height, bb.width
    try:
        bb.height, bb.width = 4 * h, 4 * w
        big = bb.default_sigmas(4, bb.initial_noise([0]))
    finally:
        bb.height, bb.width = h, w
    assert (big[0, 1:-1] > bb.default_sigmas(4, x)[0, 1:-1]).all()  # same device: both from the backbone


def test_flux_schnell_default_is_uniform():
    bb = tiny_backbone("flux-schnell")
    x = bb.initial_noise([0])
    torch.testing.assert_close(bb.default_sigmas(4, x).cpu(), uniform_sigmas(4), atol=1e-6, rtol=0)
    assert bb.default_steps == 4 and bb.pipe.transformer.config.guidance_embeds is False


def test_sd35_default_is_the_pipelines_doubly_shifted_grid():
    bb = tiny_backbone("sd35")
    x = bb.initial_noise([0])
    s = bb.pipe.scheduler.config.shift
    n = 28
    sigma_min = shift_sigmas(torch.tensor(1 / 1000, dtype=torch.float64), s)
    grid = torch.linspace(1.0, float(sigma_min), n, dtype=torch.float64)
    expected = torch.cat([shift_sigmas(grid, s), torch.zeros(1, dtype=torch.float64)])
    torch.testing.assert_close(bb.default_sigmas(n, x)[0].cpu().double(), expected, atol=1e-6, rtol=0)


def test_sdxl_default_is_leading_spacing_in_normalised_flow_time():
    from diffusers import EulerDiscreteScheduler

    bb = tiny_backbone("sdxl")
    x = bb.initial_noise([0])
    for n, first in ((4, 751), (50, 981)):
        sch = EulerDiscreteScheduler.from_config(bb.pipe.scheduler.config)
        sch.set_timesteps(n)
        assert sch.timesteps[0].item() == first
        ve = sch.sigmas.double()
        expected = flow_from_ve(ve) / flow_from_ve(ve[0])
        got = bb.default_sigmas(n, x)[0].cpu().double()
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
        # and back: the clock reproduces the pipeline's VE sigmas and integer UNet timesteps
        torch.testing.assert_close(bb.ve_sigmas(got[None].float())[0].double(), ve, rtol=2e-6, atol=0)
        from jsbench.backbones.sdxl_clock import timesteps_from_ve_sigmas

        taus = timesteps_from_ve_sigmas(bb.ve_sigmas(got[None].float())[0, :-1], bb.table)
        torch.testing.assert_close(taus, sch.timesteps.float(), atol=2e-3, rtol=0)


# ---- bf16: the loop mirrors the schedulers' mixed-precision arithmetic, not just the maths ---------------


@lru_cache(maxsize=None)
def _bf16_backbone(kind: str):
    from jsbench.backbones.flux import FluxDevBackbone, FluxSchnellBackbone
    from jsbench.backbones.sd35 import SD35Backbone
    from jsbench.backbones.sdxl import SDXLBackbone

    cls = {"sdxl": SDXLBackbone, "sd35": SD35Backbone, "flux-dev": FluxDevBackbone, "flux-schnell": FluxSchnellBackbone}[kind]
    return cls(model=str(tiny_dir(kind)), device="cpu", dtype=torch.bfloat16)


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_bf16_default_schedule_is_bit_identical_on_cpu(kind):
    """In bf16 one rounding differs by 1% after a few steps (CFG amplifies it), so "close" proves little:
    with the default schedule our loop must issue the pipeline's operations in the pipeline's dtypes,
    operand order included (see `mul_as_scheduler`), and give identical bits."""
    bb = _bf16_backbone(kind)
    assert all(p.dtype == torch.bfloat16 for p in bb.net_parameters())
    x = bb.initial_noise(SEEDS)
    lat = bb.sample_latents(x, bb.encode(PROMPTS), bb.default_sigmas(STEPS, x))
    ref = bb.pipe(PROMPTS, latents=x.clone(), output_type="latent", **pipeline_kwargs(bb, STEPS)).images
    assert lat.dtype == ref.dtype == torch.bfloat16
    assert torch.equal(lat, ref), _max_rel(lat, ref)


# ---- the adapters' defaults are the pipelines' own __call__ defaults --------------------------------------

#: where an adapter knowingly differs from its pipeline's __call__ default, and why
DOCUMENTED_DEVIATIONS = {
    # FLUX.1-schnell's model card samples with 4 steps and max_sequence_length=256 (FluxPipeline's defaults
    # are 28 and 512) and guidance_scale=0 (Schnell has no guidance embedding: the pipeline's 3.5 is unused)
    "flux-schnell": {"num_inference_steps": 4, "max_sequence_length": 256, "guidance_scale": 0.0},
}


def _call_defaults(pipe) -> dict:
    import inspect

    params = inspect.signature(type(pipe).__call__).parameters
    out = {k: params[k].default for k in ("num_inference_steps", "guidance_scale", "max_sequence_length") if k in params}
    return out


@lru_cache(maxsize=None)
def _defaults_backbone(kind: str):
    from jsbench.backbones import load_backbone

    return load_backbone(kind, model=str(tiny_defaults_dir(kind)), device="cpu")


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_adapter_defaults_are_the_pipelines_call_defaults(kind):
    """Steps, guidance, T5 length and resolution of an adapter loaded without jsbench.json settings are the
    pipeline's own __call__ defaults (except the documented deviations)."""
    bb = _defaults_backbone(kind)
    expected = {**_call_defaults(bb.pipe), **DOCUMENTED_DEVIATIONS.get(kind, {})}
    ours = {"num_inference_steps": bb.default_steps, "guidance_scale": bb.guidance_scale}
    if "max_sequence_length" in expected:
        ours["max_sequence_length"] = bb.max_sequence_length
    assert ours == expected
    # resolution: what the pipeline samples when given none (it is computed inside __call__)
    x = bb.initial_noise([0])
    ref = bb.pipe(["a red cat"], latents=x.clone(), num_inference_steps=1, output_type="latent").images
    assert tuple(ref.shape[1:]) == bb.latent_shape


@pytest.mark.slow
@pytest.mark.parametrize("kind", TINY_KINDS)
def test_parity_with_the_pipelines_own_call_defaults(kind):
    """The reference is the pipeline called with prompts and latents only: its own steps, guidance, T5
    length and resolution. Our sampler at the adapter's defaults must reproduce it (fp32: bit for bit)."""
    bb = _defaults_backbone(kind)
    x = bb.initial_noise(SEEDS[:1])
    extra = {"max_sequence_length": 256, "num_inference_steps": 4} if kind == "flux-schnell" else {}  # documented
    ref = bb.pipe(PROMPTS[:1], latents=x.clone(), output_type="latent", **extra).images
    lat = bb.sample_latents(x, bb.encode(PROMPTS[:1]), bb.default_sigmas(bb.default_steps, x))
    assert _max_rel(lat, ref) <= tolerance(bb)

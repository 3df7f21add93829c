"""The real models' denoisers at full size with random weights: their declared configs and one step's inputs.

Each diffusers adapter declares `full_size` (its published network class and config.json, latent channels,
CLIP tokens, text and pooled widths, `cfg_batch` rows per image). This module turns that into the network
and the inputs of one denoising step at the class's `default_image_size` (1024^2), on any device: on `meta`
for FLOP counts (scripts/bench_backbones.py) and on a GPU for seconds and peak memory per step
(scripts/gpu_smoke.py's `denoiser_step`).
"""

from __future__ import annotations

import time

import torch

from jsbench.backbones import backbone_class, declared_by_class
from jsbench.backbones.tiny import REAL_VAE_FACTOR

__all__ = ["FULL_SIZE", "full_size", "full_size_network", "step_inputs", "measure_denoiser_step"]

# every backbone whose own class sets `full_size`, in the registry's order
FULL_SIZE = declared_by_class("full_size")


def full_size(kind: str) -> dict:
    """FULL_SIZE[kind] plus what backbone `kind`'s class declares: `default_steps`, `text_len` (CLIP tokens +
    the adapter's T5 length, where it has a T5), and `latent`, the sampler's latent at the class's
    `default_image_size` (8x VAE): [C, h, w], or Flux's packed [tokens, 4C] (2x2 patches)."""
    spec = dict(FULL_SIZE[kind])
    cls = backbone_class(kind)
    side = cls.default_image_size // REAL_VAE_FACTOR
    c = spec["latent_channels"]
    spec["default_steps"] = cls.default_steps
    spec["text_len"] = spec["clip_len"] + int(cls.max_sequence_length)
    spec["latent"] = ((side // 2) ** 2, 4 * c) if spec["network"] == "FluxTransformer2DModel" else (c, side, side)
    return spec


def full_size_network(kind: str, device="meta", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """The full-size denoiser of backbone `kind` with random weights, created on `device` in `dtype`."""
    import diffusers

    spec = full_size(kind)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # created in dtype: a 12B float32 copy would not fit beside the bf16 one
    try:
        with torch.device(device):
            net = getattr(diffusers, spec["network"])(**spec["config"])
    finally:
        torch.set_default_dtype(previous)
    if any(p.dtype != dtype for p in net.parameters()):  # a module that made its own float32 parameters
        net = net.to(dtype=dtype)
    return net.eval().requires_grad_(False)


def step_inputs(kind: str, device="meta", dtype: torch.dtype = torch.float32) -> tuple[tuple, dict]:
    """(args, kwargs) of one denoiser call at 1024^2 for one image (`cfg_batch` rows: 2 under CFG)."""
    spec = full_size(kind)
    B, T, D = spec["cfg_batch"], spec["text_len"], spec["text_dim"]

    def t(*shape, scale=1.0):
        return torch.randn(*shape, device=device, dtype=dtype) * scale if device != "meta" else torch.empty(*shape, device=device, dtype=dtype)

    if spec["network"] == "UNet2DConditionModel":
        args = (t(B, *spec["latent"]), torch.full((B,), 500.0, device=device))
        kw = dict(encoder_hidden_states=t(B, T, D),
                  added_cond_kwargs={"text_embeds": t(B, spec["pooled"]), "time_ids": torch.full((B, 6), 1024.0, device=device, dtype=dtype)})
        return args, kw
    kw = dict(hidden_states=t(B, *spec["latent"]), timestep=torch.full((B,), 0.5 if spec["network"] == "FluxTransformer2DModel" else 500.0, device=device, dtype=dtype),
              encoder_hidden_states=t(B, T, D), pooled_projections=t(B, spec["pooled"]))
    if spec["network"] == "FluxTransformer2DModel":
        S = spec["latent"][0]
        side = int(S**0.5)
        img_ids = torch.zeros(side, side, 3, device=device, dtype=dtype)
        if device != "meta":
            img_ids[..., 1] = torch.arange(side, device=device, dtype=dtype)[:, None]
            img_ids[..., 2] = torch.arange(side, device=device, dtype=dtype)[None, :]
        kw.update(guidance=torch.full((B,), 3.5, device=device, dtype=torch.float32) if spec["config"]["guidance_embeds"] else None,
                  txt_ids=torch.zeros(T, 3, device=device, dtype=dtype), img_ids=img_ids.reshape(S, 3))
    return (), kw


def measure_denoiser_step(kind: str, device, dtype: torch.dtype = torch.bfloat16, repeat: int = 3) -> dict:
    """One full-size denoiser step of `kind` at 1024^2 (one image, CFG pair where the model uses one):
    parameters, seconds per step (median of `repeat` after a warm-up) and peak memory in GiB on CUDA
    (weights included; the `--plan` numbers). On another device the step runs once, untimed."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    net = full_size_network(kind, device, dtype)
    params = sum(p.numel() for p in net.parameters())
    weights = torch.cuda.memory_allocated(device) if cuda else None
    args, kw = step_inputs(kind, device, dtype)
    times = []
    with torch.no_grad():
        for _ in range(1 + (repeat if cuda else 0)):
            if cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            out = net(*args, **kw, return_dict=False)[0]
            if cuda:
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
    row = {"network": full_size(kind)["network"], "params": params, "rows": full_size(kind)["cfg_batch"],
           "latent": list(full_size(kind)["latent"]), "output_shape": list(out.shape),
           "finite": bool(torch.isfinite(out).all()) if device.type != "meta" else None,
           "seconds_per_step": round(sorted(times[1:])[len(times[1:]) // 2], 4) if cuda else None,
           "weights_gib": round(weights / 2**30, 3) if cuda else None,
           "peak_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 3) if cuda else None}
    del net, out
    if cuda:
        torch.cuda.empty_cache()
    return row

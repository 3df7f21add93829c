"""The cost of per-instance schedules on the real backbones' code paths, and of the policy beside the
sampler at full size: the library behind scripts/bench_backbones.py.

`bench_one`: one batched `backbone.sample` call with a distinct schedule per row over one shared
schedule, on a tiny random-weight pipeline, with the diffusers pipeline and one call per row for
context; `backbone_step_flops` and `full_size_policy`: FLOPs of one full-size backbone step and of the
policy at the real latent size, counted on the meta device (no weights, no memory).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from jsbench.backbones import backbone_class, declared_by_class, load_backbone
from jsbench.backbones.tiny import REAL_VAE_FACTOR
from jsbench.costs import per_row_schedules, timed
from jsbench.policy_features import full_size_config

# Published configs of the full-size networks (the models' transformer/unet config.json), used only on
# the meta device for FLOP counts: each adapter class's `full_size` (network class, config, latent channels,
# `clip_len` CLIP tokens in the text sequence, text and pooled widths, `cfg_batch` 2 where classifier-free
# guidance doubles the batch), for every backbone whose own class sets it, in the registry's order. What else
# the class declares (default steps, T5 length, default image size, hence the latent grid): `full_size(kind)`.
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


def _flop_count(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def backbone_step_flops(kind: str) -> tuple[int, int]:
    """(FLOPs of one denoising step at 1024 px, parameter count) of the full-size network, on meta."""
    import diffusers

    spec = full_size(kind)
    B = spec["cfg_batch"]
    with torch.device("meta"):
        net = getattr(diffusers, spec["network"])(**spec["config"])
        params = sum(p.numel() for p in net.parameters())
        T, D = spec["text_len"], spec["text_dim"]
        if spec["network"] == "UNet2DConditionModel":
            args = (torch.empty(B, *spec["latent"]), torch.empty(B))
            kw = dict(encoder_hidden_states=torch.empty(B, T, D),
                      added_cond_kwargs={"text_embeds": torch.empty(B, spec["pooled"]), "time_ids": torch.empty(B, 6)})
        elif spec["network"] == "SD3Transformer2DModel":
            args = ()
            kw = dict(hidden_states=torch.empty(B, *spec["latent"]), timestep=torch.empty(B),
                      encoder_hidden_states=torch.empty(B, T, D), pooled_projections=torch.empty(B, spec["pooled"]))
        else:
            S = spec["latent"][0]
            args = ()
            kw = dict(hidden_states=torch.empty(B, *spec["latent"]), timestep=torch.empty(B),
                      guidance=torch.empty(B) if spec["config"]["guidance_embeds"] else None,
                      encoder_hidden_states=torch.empty(B, T, D), pooled_projections=torch.empty(B, spec["pooled"]),
                      txt_ids=torch.empty(T, 3), img_ids=torch.empty(S, 3))
        flops = _flop_count(lambda: net(*args, **kw, return_dict=False))
    return flops, params


def _policy(latent_shape, pooled_dim: int, steps: int, width: int, feature_depth: int | None = None):
    """The project's DirichletSchedulePolicy when available; else LatentFeatures + the same kind of head."""
    from jsbench.policy_features import LatentFeatures

    default = [1.0 / steps] * steps
    try:
        from jsbench.policy import DirichletSchedulePolicy, PolicyConfig

        cfg = PolicyConfig(kind="instance", steps=steps, pooled_dim=pooled_dim, latent_shape=tuple(latent_shape),
                           default_increments=default, width=width)
        pol = DirichletSchedulePolicy(cfg)
        if feature_depth is not None and isinstance(pol.noise, LatentFeatures):
            pol.noise = LatentFeatures(latent_shape, width, depth=feature_depth)
        return pol, (lambda x, c: pol.log_alpha(x, c))
    except Exception:  # policy.py absent or changed: a stand-in of the same shape
        from torch import nn

        feats = LatentFeatures(latent_shape, width, depth=feature_depth)
        text = nn.Linear(pooled_dim, width)
        head = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, steps))
        mod = nn.ModuleList([feats, text, head])
        return mod, (lambda x, c: head(feats(x) + text(c)))


def full_size_policy(kind: str, steps: int) -> tuple[int, int]:
    """(forward FLOPs for one sample, parameters) of the ~20M policy at the real latent size."""
    spec = full_size(kind)
    fs = full_size_config(spec["latent"])
    with torch.device("meta"):
        pol, fwd = _policy(spec["latent"], spec["pooled"], steps, fs["width"], feature_depth=fs["depth"])
        x, c = torch.empty(1, *spec["latent"]), torch.empty(1, spec["pooled"])
        params = sum(p.numel() for p in pol.parameters())
        flops = _flop_count(lambda: fwd(x, c))
    return flops, params


def bench_one(kind: str, folder: Path, batch: int, steps: int, repeats: int, naive: bool) -> dict:
    bb = load_backbone(kind, model=str(folder), device="cpu")
    n = min(steps, bb.default_steps) if bb.timestep_distilled else steps  # a few-step sampler: at most its own steps
    prompts = [f"prompt number {i}: a red cat next to a blue car" for i in range(batch)]
    x = bb.initial_noise(list(range(batch)))
    cond = bb.encode(prompts)
    shared = bb.default_sigmas(n, x)
    per_row = per_row_schedules(shared, dtype=torch.float32)
    assert not torch.allclose(per_row[0], per_row[1])

    kw = dict(height=bb.height, width=bb.width, output_type="pt", guidance_scale=bb.guidance_scale)
    if bb.max_sequence_length:  # a T5 (SD3.5, Flux; not SD-XL)
        kw["max_sequence_length"] = bb.max_sequence_length
    emb = {k: v for k, v in cond.tensors.items()}

    def pipe_shared():
        bb.pipe(prompt_embeds=emb["prompt_embeds"], pooled_prompt_embeds=emb["pooled_prompt_embeds"],
                **({k: emb[k] for k in emb if k.startswith("negative")}), latents=x.clone(), num_inference_steps=n, **kw)

    def pipe_naive():
        for b in range(batch):
            one = {k: v[b : b + 1] for k, v in emb.items()}
            bb.pipe(**one, latents=x[b : b + 1].clone(), sigmas=bb.pipeline_sigmas(per_row[b]), **kw)

    pol, fwd = _policy(bb.latent_shape, bb.pooled_dim, n, width=32)
    pol.eval()

    def policy_forward():
        with torch.no_grad():
            fwd(x.float(), cond.pooled)

    calls = {
        "per_row": lambda: bb.sample(x, cond, per_row),
        "shared": lambda: bb.sample(x, cond, shared),
        "pipeline_shared": pipe_shared,
        "policy": policy_forward,
    }
    if naive:
        calls["pipeline_per_row_calls"] = pipe_naive
    for fn in calls.values():  # warm-up: first calls pay one-off kernel setup
        fn()
    times: dict[str, list[float]] = {k: [] for k in calls}
    ratios = []
    for r in range(repeats):
        order = ["per_row", "shared"] if r % 2 == 0 else ["shared", "per_row"]
        got = {k: timed(calls[k]) for k in order}
        ratios.append(got["per_row"] / got["shared"])
        for k in order:
            times[k].append(got[k])
        for k in calls:
            if k not in order:
                times[k].append(timed(calls[k]))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "backbone": kind,
        "batch": batch,
        "steps": n,
        "latent_shape": list(bb.latent_shape),
        "resolution": [bb.height, bb.width],
        "seconds_median": med,
        "per_row_over_shared_median": statistics.median(ratios),
        "per_row_over_shared_all": ratios,
        "per_row_over_pipeline": med["per_row"] / med["pipeline_shared"],
        "naive_over_per_row": (med["pipeline_per_row_calls"] / med["per_row"]) if naive else None,
        "tiny_policy_params": sum(p.numel() for p in pol.parameters()),
        "tiny_policy_over_sampler": med["policy"] / med["per_row"],
    }

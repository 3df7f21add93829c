"""The cost of per-instance schedules on the real backbones' code paths, and of the policy beside the
sampler at full size: the library behind scripts/bench_backbones.py.

`bench_one`: one batched `backbone.sample` call with a distinct schedule per row over one shared
schedule, on a tiny random-weight pipeline, with the diffusers pipeline and one call per row for
context; `backbone_step_flops` and `full_size_policy`: FLOPs of one full-size backbone step and of the
policy `train` builds at the real shapes, counted on the meta device (no weights, no memory).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from jsbench.backbones import load_backbone
from jsbench.backbones.full_size import FULL_SIZE, full_size  # noqa: F401 (re-exported for scripts/bench_backbones.py)
from jsbench.analysis.costs import per_row_schedules, time_per_row_against_shared

# The full-size networks' published configs and shapes live with the backbones (jsbench.backbones.full_size)


def backbone_step_flops(kind: str) -> tuple[int, int]:
    """(FLOPs of one denoising step at 1024 px, parameter count) of the full-size network, on meta: the count
    `jsbench policies size` divides by (one function, so the two never disagree)."""
    from jsbench.policy.size import denoiser_step_flops

    return denoiser_step_flops(kind)


def _policy(latent_shape, pooled_dim: int, steps: int, width: int, feature_depth: int | None = None):
    """The project's DirichletSchedulePolicy when available; else LatentFeatures + the same kind of head."""
    from jsbench.policy.features import LatentFeatures

    default = [1.0 / steps] * steps
    try:
        from jsbench.policy.schedule_policy import DirichletSchedulePolicy, PolicyConfig

        cfg = PolicyConfig(kind="instance", steps=steps, pooled_dim=pooled_dim, latent_shape=tuple(latent_shape),
                           default_increments=default, width=width)
        pol = DirichletSchedulePolicy(cfg)
        if feature_depth is not None and isinstance(pol.noise, LatentFeatures):
            pol.noise = LatentFeatures(latent_shape, width, depth=feature_depth)
        return pol, (lambda x, c: pol.log_alpha(x, c))
    except Exception:  # policy/schedule_policy.py absent or changed: a stand-in of the same shape
        from torch import nn

        feats = LatentFeatures(latent_shape, width, depth=feature_depth)
        text = nn.Linear(pooled_dim, width)
        head = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, steps))
        mod = nn.ModuleList([feats, text, head])
        return mod, (lambda x, c: head(feats(x) + text(c)))


def full_size_policy(kind: str, steps: int) -> tuple[int, int]:
    """(forward FLOPs for one sample, parameters) of the policy `jsbench train` builds at the real shapes
    (`jsbench policies size`: the xattn architecture, reading the prompt's tokens)."""
    from jsbench.policy.size import policy_size

    row = policy_size(kind, steps, sampler=False)
    return round(row["gflops_per_row"] * 1e9), row["params"]


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
    med, ratios = time_per_row_against_shared(calls, repeats)
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

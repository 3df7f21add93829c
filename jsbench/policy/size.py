"""The size of the policy `train` builds for a real backbone at full size, next to the sampler's cost.

`policy_size(name)` builds the policy for the backbone's published shapes (latent at 1024^2, pooled width,
token count and width) on the meta device: no weights, no memory. Its forward FLOPs and one full-size
denoiser step's are counted with torch's FlopCounterMode (`jsbench policies size`, scripts/bench_backbones.py).
"""

from __future__ import annotations

import torch

from jsbench import JsbenchError
from jsbench.backbones import backbone_class
from jsbench.backbones.full_size import FULL_SIZE, full_size, full_size_network, full_size_owner, step_inputs
from jsbench.policy.schedule_policy import POLICY_ARCHS, PolicyConfig, build_policy

__all__ = ["policy_size", "full_size_name", "flop_count", "denoiser_step_flops"]


def flop_count(fn) -> int:
    """Forward FLOPs of `fn()` (torch's FlopCounterMode; on meta tensors: no memory, no time)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def denoiser_step_flops(name: str) -> tuple[int, int]:
    """(FLOPs of one denoising step at 1024^2 for one image, `cfg_batch` rows; parameters) of the full-size network."""
    net = full_size_network(name, "meta")
    args, kw = step_inputs(name, "meta")
    with torch.device("meta"):
        flops = flop_count(lambda: net(*args, **kw, return_dict=False))
    return flops, sum(p.numel() for p in net.parameters())


def full_size_name(name: str) -> str:
    """The FULL_SIZE entry that sizes backbone `name`: its own, or the one its class inherits unchanged (sd35-medium
    is sd35's network); refused for a name without one (the embedded worlds, scenes-dit: not a published model)."""
    owner = full_size_owner(name)
    if owner is not None:
        return owner
    raise JsbenchError(f"no full-size shapes for backbone {name!r}; one of {', '.join(FULL_SIZE)} (or a variant of one)")


def policy_size(name: str, steps: int | None = None, arch: str | None = None, sampler: bool = True) -> dict:
    """The policy `jsbench train --backbone NAME --steps N [--policy-arch A]` builds, at full size:
    {"params", "reads", "gflops_per_row", "sampler_share"} and its settings. `sampler_share` is the policy's
    forward over one full sampling (N denoiser steps, guidance rows included); None with `sampler=False`."""
    from jsbench.policy.schedule_policy import default_arch
    from jsbench.policy.xattn import xattn_defaults

    sized = full_size_name(name)
    if arch not in (None, "auto", *POLICY_ARCHS):
        raise JsbenchError(f"unknown policy architecture {arch!r} (auto, {', '.join(POLICY_ARCHS)})")
    spec = full_size(sized)
    steps = int(steps or spec["default_steps"])
    if steps < 1:
        raise JsbenchError(f"--steps must be at least 1, got {steps}")
    arch = default_arch(backbone_class(name)) if arch in (None, "auto") else arch
    latent, pooled, T, D = tuple(spec["latent"]), int(spec["pooled"]), int(spec["text_len"]), int(spec["text_dim"])
    width, depth = xattn_defaults(latent) if arch == "xattn" else (128, 2)
    config = PolicyConfig(kind="instance", steps=steps, pooled_dim=pooled, latent_shape=latent, default_increments=[1.0 / steps] * steps,
                          width=width, depth=depth, arch=arch, token_dim=D if arch == "xattn" else None)
    with torch.device("meta"):
        policy = build_policy(config)
        x, p = torch.empty(1, *latent), torch.empty(1, pooled)
        tokens, mask = torch.empty(1, T, D), torch.ones(1, T, dtype=torch.bool)
        flops = flop_count(lambda: policy.log_alpha(x, p, tokens, mask))
    reads = [f"x_T[{','.join(map(str, latent))}]", f"pooled[{pooled}]"]
    if arch == "xattn":
        t5 = T - int(spec["clip_len"])
        parts = [f"CLIP {spec['clip_len']}"] * bool(spec["clip_len"]) + [f"T5 {t5}"] * bool(t5)
        reads.append(f"tokens[{T},{D}] ({' + '.join(parts)})")
    share = None
    if sampler:
        step, _ = denoiser_step_flops(sized)
        share = flops / (steps * step)
    return {"backbone": name, "arch": arch, "steps": steps, "width": width, "depth": depth,
            "params": sum(t.numel() for t in policy.parameters()), "reads": reads,
            "gflops_per_row": flops / 1e9, "sampler_share": share}

"""diffusers' sigma families on the backbone's own clock: `karras[:RHO]`, `exponential`, `beta[:A,B]`."""

from __future__ import annotations

import math

import torch

from jsbench.schedule import beta_levels, exponential_levels, karras_levels
from jsbench.zoo.clock import ZooError, clock
from jsbench.zoo.registry import constant_source, register_zoo

__all__ = ["family_sigmas"]


def _parse_numbers(spec: str, arg: str, count: int, example: str) -> list[float]:
    parts = [p.strip() for p in arg.split(",")] if arg else []
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != count or not all(math.isfinite(v) and v > 0 for v in values):
        raise ZooError(f"bad schedule {spec!r}: give {count} positive number{'s' * (count > 1)}, e.g. {example}")
    return values


def family_sigmas(backbone, spec: str, steps: int) -> tuple[torch.Tensor, str]:
    """(row [N+1] float32 on the policy clock, label) of `karras[:rho]`, `exponential` or `beta[:a,b]`."""
    kind, _, arg = spec.partition(":")
    ck = clock(backbone, steps)
    hi, lo = ck.sigma_max, ck.sigma_min
    if kind == "karras":
        rho = _parse_numbers(spec, arg, 1, "karras:7")[0] if arg else 7.0
        levels, label = karras_levels(hi, lo, steps, rho), "karras" if rho == 7.0 else f"karras (rho {rho:g})"
    elif kind == "exponential":
        if arg:
            raise ZooError(f"bad schedule {spec!r}: exponential takes no parameter")
        levels, label = exponential_levels(hi, lo, steps), "exponential"
    elif kind == "beta":
        a, b = _parse_numbers(spec, arg, 2, "beta:0.6,0.6") if arg else (0.6, 0.6)
        levels, label = beta_levels(hi, lo, steps, a, b), "beta" if (a, b) == (0.6, 0.6) else f"beta ({a:g}, {b:g})"
    else:
        raise ZooError(f"{kind!r} is not a schedule family (karras, exponential, beta)")
    return ck.row(levels, label), label



def _build(spec: str, backbone, steps: int, suite=None, log=None):
    row, label = family_sigmas(backbone, spec, steps)
    return constant_source(label, row)


for _kind in ("karras", "exponential", "beta"):
    register_zoo(_kind)(_build)

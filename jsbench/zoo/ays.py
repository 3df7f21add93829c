"""Align Your Steps (diffusers' `AysSchedules`) where the model family has one: SD-XL."""

from __future__ import annotations

import torch

from jsbench.schedule import loglinear_interp
from jsbench.zoo.clock import ZooError, clock, is_discrete
from jsbench.zoo.registry import constant_source, register_zoo

__all__ = ["ays_sigmas"]


def _ays_backbones() -> list[str]:
    """The registered backbones whose class declares an Align Your Steps schedule (`ays_schedule`)."""
    from jsbench.backbones import available_backbones, backbone_class

    classes = {name: backbone_class(name) for name in available_backbones()}
    return sorted(name for name, cls in classes.items() if cls is not None and cls.ays_schedule is not None and cls.clock_kind == "discrete")


def ays_sigmas(backbone, steps: int) -> torch.Tensor:
    """Align Your Steps on this backbone's clock, [N+1] float32.

    The 10-step schedule is diffusers' `AysSchedules` entry (its final 0 replaces the smallest trained
    noise level, sigma(tau = 0) = 0.0292 for SD-XL, which the AYS authors list). Other budgets use the
    authors' recipe: log-linear interpolation of the 11 levels to N+1 points, the last set to 0. AYS starts
    at the largest trained noise level; on this backbone's clock every schedule starts where the
    pipeline's own N-step schedule starts (SD-XL's "leading" spacing starts below tau = 999), so the
    first level is pinned to that start and the rest are run as given. A budget whose second level would
    lie at or above the start is refused.
    """
    applies(backbone)
    key = backbone.ays_schedule
    from diffusers.schedulers import AysSchedules

    listed = [float(v) for v in AysSchedules[key]]
    if listed[-1] != 0.0:
        raise ZooError(f"ays: diffusers' {key} does not end at 0: {listed}")
    floor = float(backbone.table[0])  # the smallest trained noise level (tau = 0)
    levels = torch.tensor(listed[:-1] + [floor], dtype=torch.float64)
    points = levels if steps + 1 == levels.numel() else loglinear_interp(levels, steps + 1)
    ck = clock(backbone, steps)
    points = points[:-1].clone()  # the final level becomes 0
    points[0] = ck.native[0]  # AYS starts at the largest level; here, at the pipeline's N-step start
    if steps > 1 and points[1] >= points[0]:
        raise ZooError(
            f"ays: at {steps} steps its second noise level {points[1].item():.4g} is not below this backbone's "
            f"{steps}-step start {points[0].item():.4g} ({backbone.timestep_spacing!r} spacing)"
        )
    return ck.row(points, "ays")


def applies(cls) -> None:
    """ScheduleKind.applies: a backbone (or its class) whose family has an Align Your Steps entry (`ays_schedule`,
    on its discrete clock); ZooError otherwise."""
    if cls.ays_schedule is None or not is_discrete(cls):
        have = ", ".join(_ays_backbones())
        raise ZooError(f"ays: diffusers' AysSchedules has no schedule for {cls.name} (only {have}); try karras, oss or searched")


def _available(backbone, steps: int) -> None:
    ays_sigmas(backbone, steps)


@register_zoo("ays", available=_available)
def _build(spec: str, backbone, steps: int, suite=None, log=None):
    if spec.partition(":")[2]:
        raise ZooError(f"bad schedule {spec!r}: ays takes no parameter")
    return constant_source("ays", ays_sigmas(backbone, steps))

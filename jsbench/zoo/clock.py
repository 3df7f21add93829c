"""The backbone's clock: how the policy's clock relates to the native sigma diffusers' formulas act on,
and the pieces every zoo source shares (its error, a row's digest)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Callable

import torch

from jsbench.schedule import ScheduleError, check_sigmas
from jsbench.zoo.registry import ZooError  # defined with the registry, which imports no torch

__all__ = ["ZooError", "Clock", "clock", "is_discrete", "digest"]


@dataclass
class Clock:
    """How the policy's clock u (what `sample` takes) relates to the sigma diffusers' formulas act on.

    `native` are the N+1 native sigmas of the backbone's default N-step schedule (the last one 0).
    """

    steps: int
    native: torch.Tensor  # [N+1] float64, native sigma
    from_native: Callable[[torch.Tensor], torch.Tensor]
    config_min: float | None = None  # a scheduler config's own sigma_min / sigma_max, which diffusers prefers
    config_max: float | None = None

    @property
    def sigma_max(self) -> float:
        return float(self.config_max if self.config_max is not None else self.native[0])

    @property
    def sigma_min(self) -> float:
        return float(self.config_min if self.config_min is not None else self.native[-2])

    def row(self, levels: torch.Tensor, what: str) -> torch.Tensor:
        """N native levels (decreasing) + the final 0 -> a [N+1] float32 row on the policy clock."""
        levels = levels.to(torch.float64)
        if levels[0] > self.native[0] * (1 + 1e-6):
            raise ZooError(
                f"{what}: its first noise level {levels[0].item():.4g} lies above the start of this backbone's "
                f"{self.steps}-step schedule ({self.native[0].item():.4g}), where every schedule here starts"
            )
        u = self.from_native(levels)
        u[0] = 1.0  # the first level is the start (equal up to round-off, checked above)
        row = torch.cat([u, torch.zeros(1, dtype=torch.float64)]).to(torch.float32)
        try:
            check_sigmas(row[None])
        except ScheduleError as exc:
            raise ZooError(f"{what} is not a valid {self.steps}-step schedule on this backbone: {exc}") from None
        return row


def is_discrete(backbone) -> bool:
    """A backbone on a discrete (VE-sigma) scheduler, which offers `base.DiscreteClock`'s calls (SD-XL)."""
    return backbone.clock_kind == "discrete"


def clock(backbone, steps: int) -> Clock:
    """The backbone's clock at N steps: flow time (analytic, SD3, Flux) or SD-XL's VE sigma."""
    default = backbone.default_sigmas(steps, torch.zeros(1, 1))[0].detach().to("cpu", torch.float64)
    if is_discrete(backbone):
        from jsbench.backbones.sdxl_clock import flow_sigmas_from_ve

        ve_start = float(backbone.ve_start(steps))
        native = backbone.ve_sigmas(default[None].to(torch.float32))[0].detach().to("cpu", torch.float64)

        def from_native(s: torch.Tensor) -> torch.Tensor:
            return flow_sigmas_from_ve(s, ve_start)

        config_min, config_max = backbone.scheduler_sigma_range()
        return Clock(steps, native, from_native, config_min, config_max)
    return Clock(steps, default, lambda s: s.to(torch.float64).clone())



def digest(t: torch.Tensor) -> str:
    """A short checksum of a schedule row (values rounded to 7 digits)."""
    return hashlib.sha256(json.dumps([round(float(v), 7) for v in t.tolist()]).encode()).hexdigest()[:16]

"""The hand-made schedule sources: `default`, `ceiling[:N]`, `uniform` and `shift:S`."""

from __future__ import annotations

import torch

from jsbench.schedule import shifted_sigmas, uniform_sigmas
from jsbench.zoo.registry import ScheduleSource, ZooError, register_source


@register_source("default")
def _default(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource:
    return ScheduleSource(spec, "default", steps, lambda x, c: backbone.default_sigmas(steps, x))


@register_source("ceiling")
def _ceiling(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource:
    # each backbone names its own many-step reference (`ceiling_steps`: 200, scenes-dit's 50); the row is
    # a reference for every budget, so it has none of its own
    arg = spec.partition(":")[2]
    n = int(arg) if arg else int(backbone.ceiling_steps)
    own = n == backbone.default_steps and not backbone.draws_embedded_world  # a real model's own count
    return ScheduleSource(spec, f"ceiling ({n} steps{', pipeline default' if own else ''})", n, lambda x, c: backbone.default_sigmas(n, x),
                          budget=None)


# Schedules stay float32 up to the backbone, whatever the latents' dtype: the adapter alone turns them
# into model timesteps (rounded to bf16 here, neighbouring sigmas near 1 would merge)
@register_source("uniform")
def _uniform(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource:
    return ScheduleSource(spec, "uniform", steps, lambda x, c: uniform_sigmas(steps, x.shape[0], torch.float32, x.device))


@register_source("shift")
def _shift(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource:
    try:
        s = float(spec.partition(":")[2])
    except ValueError:
        raise ZooError(f"bad schedule {spec!r}: shift needs a number, e.g. shift:3") from None
    return ScheduleSource(spec, f"shift {s:g}", steps, lambda x, c: shifted_sigmas(steps, s, x.shape[0], torch.float32, x.device))

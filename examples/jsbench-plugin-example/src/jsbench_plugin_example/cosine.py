"""`cosine[:S]`: the cosine schedule of Nichol & Dhariwal, "Improved Denoising Diffusion Probabilistic Models"
(ICML 2021, eq. 17), on jsbench's flow-time clock. Imports no torch until it is built, so `jsbench --help`
stays fast with the plugin installed."""

from __future__ import annotations

import math

from jsbench.zoo.registry import ScheduleKind, ScheduleSource, ZooError

OFFSET = 0.008  # the paper's s: keeps beta_t from being too small near t = 0


def cosine_sigmas(steps: int, offset: float = OFFSET) -> list[float]:
    """N + 1 flow-time sigmas, 1 -> 0, at uniform t = 1 - k/N of the cosine alpha_bar."""
    def alpha_bar(t: float) -> float:
        return math.cos(math.pi / 2 * (t + offset) / (1 + offset)) ** 2 / math.cos(math.pi / 2 * offset / (1 + offset)) ** 2

    out = []
    for k in range(steps + 1):
        a = min(max(alpha_bar(1 - k / steps), 0.0), 1.0)
        out.append(math.sqrt(1 - a) / (math.sqrt(a) + math.sqrt(1 - a)))
    out[0], out[-1] = 1.0, 0.0  # exact ends (cos(pi/2) is 6e-17 in floating point)
    return out


def build(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource:
    import torch

    arg = spec.partition(":")[2]
    try:
        offset = float(arg) if arg else OFFSET
    except ValueError:
        offset = -1.0
    if not offset >= 0:
        raise ZooError(f"bad schedule {spec!r}: cosine takes the offset s >= 0, e.g. cosine:0.008")
    row = torch.tensor(cosine_sigmas(steps, offset), dtype=torch.float32)
    label = "cosine" if offset == OFFSET else f"cosine (s {offset:g})"

    def make(x, c):
        return row.to(x.device).expand(x.shape[0], -1).clone()

    return ScheduleSource(spec, label, steps, make, checksum=f"cosine-{offset!r}-{steps}")


COSINE = ScheduleKind(
    "cosine", "cosine[:S]", "the cosine schedule of Improved DDPM (Nichol & Dhariwal 2021), offset s = 0.008",
    build=build, zoo=True, order=8.5,  # a zoo row (--zoo cosine), listed after searched, before file
)

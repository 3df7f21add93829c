"""Schedules: increments <-> sigmas, default schedules and validity checks.

A schedule for N steps is a row of N+1 *sigmas* in flow time, sigma_0 = 1 > sigma_1 > ... > sigma_N = 0,
or equivalently N positive *increments* Delta_j = sigma_{j-1} - sigma_j on the simplex. Policies speak
increments; samplers speak sigmas; a backbone whose native clock is not flow time converts next to its
adapter (SD-XL's VE sigma and DDPM timesteps: `jsbench/backbones/sdxl_clock.py`).
"""

from __future__ import annotations

import math

import torch

from jsbench import JsbenchError

__all__ = [
    "ScheduleError",
    "sigmas_from_increments",
    "increments_from_sigmas",
    "floor_increments",
    "unfloor_increments",
    "uniform_sigmas",
    "shift_sigmas",
    "shifted_sigmas",
    "check_sigmas",
    "default_floor",
]


class ScheduleError(JsbenchError):
    """A schedule that no sampler may run."""


def default_floor(steps: int) -> float:
    """The smallest increment a policy may produce: 1% of a uniform step, so every step moves."""
    return 0.01 / steps


def sigmas_from_increments(increments: torch.Tensor) -> torch.Tensor:
    """[..., N] positive increments summing to 1 -> [..., N+1] sigmas from exactly 1 down to exactly 0."""
    total = increments.sum(-1, keepdim=True)
    # renormalise so float round-off in the sum cannot leave sigma_N != 0
    remaining = 1.0 - torch.cumsum(increments / total, dim=-1)
    remaining = remaining.clamp(min=0.0)
    remaining[..., -1] = 0.0
    one = torch.ones_like(remaining[..., :1])
    return torch.cat([one, remaining], dim=-1)


def increments_from_sigmas(sigmas: torch.Tensor) -> torch.Tensor:
    """[..., N+1] sigmas -> [..., N] increments sigma_{j-1} - sigma_j."""
    return sigmas[..., :-1] - sigmas[..., 1:]


def floor_increments(simplex: torch.Tensor, floor: float) -> torch.Tensor:
    """Map a point D of the simplex to Delta = floor + (1 - N*floor) * D, so no increment is below floor.

    The map is affine with a constant Jacobian, so log-densities of D serve as log-densities of Delta
    up to a constant that cancels in every policy gradient.
    """
    steps = simplex.shape[-1]
    if not 0.0 <= floor * steps < 1.0:
        raise ScheduleError(f"increment floor {floor} is too large for {steps} steps (need floor*steps < 1)")
    return floor + (1.0 - steps * floor) * simplex


def unfloor_increments(increments: torch.Tensor, floor: float) -> torch.Tensor:
    """Inverse of floor_increments (the point of the simplex behind a floored increment vector)."""
    steps = increments.shape[-1]
    return (increments - floor) / (1.0 - steps * floor)


def uniform_sigmas(steps: int, batch: int = 1, dtype=torch.float32, device=None) -> torch.Tensor:
    """Euler's uniform grid 1, 1-1/N, ..., 0 as a [batch, N+1] tensor."""
    _check_steps(steps)
    row = torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float64)
    return row.to(dtype=dtype, device=device).expand(batch, -1).clone()


def shift_sigmas(sigmas: torch.Tensor, shift: float) -> torch.Tensor:
    """The SD3/Flux time shift sigma' = s*sigma / (1 + (s-1)*sigma); keeps 1 -> 1 and 0 -> 0."""
    if shift <= 0:
        raise ScheduleError(f"shift must be positive, got {shift}")
    return shift * sigmas / (1.0 + (shift - 1.0) * sigmas)


def shifted_sigmas(steps: int, shift: float, batch: int = 1, dtype=torch.float32, device=None) -> torch.Tensor:
    """The uniform grid under the SD3/Flux shift, [batch, N+1]."""
    return shift_sigmas(uniform_sigmas(steps, batch, torch.float64), shift).to(dtype=dtype, device=device)


def check_sigmas(sigmas: torch.Tensor, min_increment: float = 0.0, free_start: bool = False) -> None:
    """Raise ScheduleError unless every row starts at 1, ends at 0 and strictly decreases.

    `free_start`: a row may start at any level in (0, 1], the initial noise entered at that flow time (OSS's
    free start, `jsbench.zoo.oss`); flow-time samplers run such a row from x_T at its first level."""
    if sigmas.dim() != 2 or sigmas.shape[-1] < 2:
        raise ScheduleError(f"sigmas must be [batch, steps+1] with steps >= 1, got shape {tuple(sigmas.shape)}")
    if not torch.isfinite(sigmas).all():
        raise ScheduleError("schedule contains NaN or infinite sigmas")
    if free_start:
        if ((sigmas[:, 0] <= 0) | (sigmas[:, 0] > 1 + 1e-6)).any():
            raise ScheduleError("every schedule must start at a sigma in (0, 1]")
    elif not torch.allclose(sigmas[:, 0], torch.ones_like(sigmas[:, 0]), atol=1e-6):
        raise ScheduleError("every schedule must start at sigma = 1")
    if (sigmas[:, -1] != 0).any():
        raise ScheduleError("every schedule must end at sigma = 0")
    steps = increments_from_sigmas(sigmas)
    if (steps <= min_increment).any():
        worst = steps.min().item()
        raise ScheduleError(f"schedule has a step of {worst:.3g} (must be > {min_increment:.3g}): not strictly decreasing")


def _check_steps(steps: int) -> None:
    if not isinstance(steps, int) or steps < 1:
        raise ScheduleError(f"steps must be a positive integer, got {steps!r}")



# ======================================================================================================
# Schedule families (issue 17): diffusers' sigma formulas, and the candidate set of the searched schedule.
# Each formula returns the N *non-terminal* noise levels from sigma_max down to sigma_min in the backbone's
# native sigma (flow time for flow models, VE sigma for SD-XL), exactly as diffusers'
# `_convert_to_karras` / `_convert_to_exponential` / `_convert_to_beta` do; `jsbench.zoo` appends the
# final 0 and maps the row onto the policy's clock.
# ======================================================================================================

__all__ += ["karras_levels", "exponential_levels", "beta_levels", "loglinear_interp", "candidate_schedules"]


def _check_levels_args(sigma_max: float, sigma_min: float, steps: int) -> None:
    _check_steps(steps)
    if not (0.0 < sigma_min <= sigma_max) or not all(map(math.isfinite, (sigma_min, sigma_max))):
        raise ScheduleError(f"need 0 < sigma_min <= sigma_max, got sigma_min={sigma_min}, sigma_max={sigma_max}")
    if steps > 1 and sigma_min == sigma_max:
        raise ScheduleError(f"sigma_min = sigma_max = {sigma_max} leaves no room for {steps} distinct levels")


def karras_levels(sigma_max: float, sigma_min: float, steps: int, rho: float = 7.0) -> torch.Tensor:
    """Karras et al. (EDM): (max^(1/rho) + r (min^(1/rho) - max^(1/rho)))^rho, r = linspace(0, 1, N); float64 [N].

    diffusers' `_convert_to_karras` with its fixed rho = 7; strictly decreasing for any rho > 0."""
    if not (rho > 0 and math.isfinite(rho)):
        raise ScheduleError(f"karras rho must be a positive number, got {rho}")
    _check_levels_args(sigma_max, sigma_min, steps)
    ramp = torch.linspace(0, 1, steps, dtype=torch.float64)
    lo, hi = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return (hi + ramp * (lo - hi)) ** rho


def exponential_levels(sigma_max: float, sigma_min: float, steps: int) -> torch.Tensor:
    """exp(linspace(log max, log min, N)), diffusers' `_convert_to_exponential`; float64 [N]."""
    _check_levels_args(sigma_max, sigma_min, steps)
    return torch.exp(torch.linspace(math.log(sigma_max), math.log(sigma_min), steps, dtype=torch.float64))


def beta_levels(sigma_max: float, sigma_min: float, steps: int, a: float = 0.6, b: float = 0.6) -> torch.Tensor:
    """min + ppf_Beta(a, b)(1 - linspace(0, 1, N)) (max - min), diffusers' `_convert_to_beta` (Lee et al.,
    "Beta sampling is all you need"; diffusers fixes a = b = 0.6); float64 [N]."""
    import numpy as np
    import scipy.stats

    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise ScheduleError(f"beta parameters must be positive numbers, got a={a}, b={b}")
    _check_levels_args(sigma_max, sigma_min, steps)
    ppf = scipy.stats.beta.ppf(1 - np.linspace(0, 1, steps), a, b)
    return torch.as_tensor(sigma_min + ppf * (sigma_max - sigma_min), dtype=torch.float64)


def loglinear_interp(levels: torch.Tensor | list, count: int) -> torch.Tensor:
    """Align Your Steps' interpolation of a decreasing positive schedule to `count` points: linear in
    log sigma over a normalised index (the AYS authors' `loglinear_interp`); float64 [count]."""
    import numpy as np

    ys = torch.as_tensor(levels, dtype=torch.float64)
    if ys.dim() != 1 or ys.numel() < 2 or (ys <= 0).any() or (ys[1:] >= ys[:-1]).any():
        raise ScheduleError("log-linear interpolation needs at least two strictly decreasing positive levels")
    if count < 2:
        raise ScheduleError(f"log-linear interpolation needs at least 2 points, got {count}")
    xs = np.linspace(0, 1, ys.numel())
    new = np.interp(np.linspace(0, 1, count), xs, np.log(ys.flip(0).numpy()))
    return torch.as_tensor(np.exp(new), dtype=torch.float64).flip(0)


def candidate_schedules(steps: int, random_count: int = 120, seed: int = 0, grid_points: int = 20, shifts: int = 24) -> torch.Tensor:
    """[C, N+1] float32 candidates of the searched global schedule: uniform, shifted grids, every pair of
    interior points on a grid for N = 3 (every point for N = 2), and seeded Dirichlet draws around uniform
    for larger N. The defaults give 215 candidates at N = 3; a neural backbone affords fewer."""
    import itertools

    _check_steps(steps)
    rows = [uniform_sigmas(steps)[0].to(torch.float64)]
    rows += [shifted_sigmas(steps, float(s), dtype=torch.float64)[0] for s in torch.logspace(-1.3, 1.0, shifts, dtype=torch.float64)]
    grid = torch.linspace(0.04, 0.96, grid_points).tolist()
    if steps == 2:
        rows += [torch.tensor([1.0, t, 0.0], dtype=torch.float64) for t in grid]
    elif steps == 3:
        rows += [torch.tensor([1.0, a, b, 0.0], dtype=torch.float64) for a, b in itertools.combinations(sorted(grid, reverse=True), 2)]
    elif steps > 3 and random_count:
        gen = torch.Generator().manual_seed(seed)
        gammas = -torch.log(torch.rand(random_count, steps, 3, generator=gen)).sum(-1)  # Gamma(3) draws
        simplex = gammas / gammas.sum(-1, keepdim=True)
        rows += list(sigmas_from_increments(0.01 / steps + (1 - 0.01) * simplex))
    return torch.stack([r.to(torch.float32) for r in rows])

"""SD-XL's clock: flow-time sigma <-> Karras/EDM "VE" sigma <-> DDPM discrete timestep.

Everything SD-XL needs to speak the policy's flow-time clock is here and nowhere else (it lived in
`jsbench/schedule.py` until issue 13). Pure tensor arithmetic: importing it loads no diffusers. EulerDiscreteScheduler integrates x_ve = x_0 + s * eps (s = sqrt((1 - abar)/abar)),
the UNet is conditioned on the DDPM training timestep tau whose noise level is s, and a flow state is
x_flow = (1 - t) x_0 + t eps = x_ve / (1 + s), so t = s / (1 + s).

The policy's clock for SD-XL is *normalised flow time*: u = t / t_start, where t_start is the flow time of
the first noise level the pipeline's own N-step schedule visits. u = 1 is that start (SD-XL cannot start at
pure noise, t = 1: its largest trained noise level is s ~ 14.6, t ~ 0.936, and with "leading" spacing the
N-step default starts lower still, e.g. tau = 751 for N = 4), u = 0 is the clean image (s = 0). So every
schedule the policy emits starts where the pipeline starts and ends where it ends, increments on the
simplex keep their meaning, and a fraction of u is a fraction of the flow-time distance travelled.
Euler on the VE ODE with an epsilon model takes exactly the same steps as Euler in flow time (both are
DDIM), so this is a change of clock, not of sampler.
"""

from __future__ import annotations

import torch

from jsbench.schedule import ScheduleError

__all__ = [
    "ve_sigma_table",
    "flow_from_ve",
    "ve_from_flow",
    "ve_sigmas_from_flow",
    "flow_sigmas_from_ve",
    "timesteps_from_ve_sigmas",
    "ve_sigmas_from_timesteps",
]


def ve_sigma_table(alphas_cumprod: torch.Tensor) -> torch.Tensor:
    """The VE (Karras/EDM) sigma of every DDPM training timestep, [T] float32, increasing in tau.

    Computed exactly as EulerDiscreteScheduler does (float32 `((1 - abar) / abar) ** 0.5`), so table entries
    are bit-identical to the scheduler's sigmas at integer timesteps.
    """
    a = alphas_cumprod.to(torch.float32)
    return ((1 - a) / a) ** 0.5


def flow_from_ve(sigma_ve: torch.Tensor) -> torch.Tensor:
    """Flow time t = s / (1 + s) of a VE noise level s (x_flow = x_ve / (1 + s))."""
    return sigma_ve / (1.0 + sigma_ve)


def ve_from_flow(t: torch.Tensor) -> torch.Tensor:
    """VE noise level s = t / (1 - t) of flow time t < 1."""
    if (t >= 1).any():
        raise ScheduleError("flow time 1 (pure noise) has no finite VE sigma; SD-XL schedules start below it")
    return t / (1.0 - t)


def ve_sigmas_from_flow(sigmas: torch.Tensor, ve_start: float | torch.Tensor) -> torch.Tensor:
    """Policy clock -> VE sigmas: u in [0, 1] (u = 1 at the pipeline's first noise level `ve_start`) -> s.

    Computed in float64 and returned in float32 (the scheduler's precision); u = 1 maps to `ve_start`
    to within float32 round-off and u = 0 maps to exactly 0.
    """
    u = sigmas.to(torch.float64)
    t_start = flow_from_ve(torch.as_tensor(ve_start, dtype=torch.float64, device=u.device))
    out = ve_from_flow(u * t_start)
    return out.to(torch.float32)


def flow_sigmas_from_ve(sigma_ve: torch.Tensor, ve_start: float | torch.Tensor) -> torch.Tensor:
    """VE sigmas -> policy clock u = t(s) / t(ve_start); the inverse of `ve_sigmas_from_flow` (float32 out)."""
    s = sigma_ve.to(torch.float64)
    t_start = flow_from_ve(torch.as_tensor(ve_start, dtype=torch.float64, device=s.device))
    return (flow_from_ve(s) / t_start).to(torch.float32)


def timesteps_from_ve_sigmas(sigma_ve: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The UNet timestep of each VE sigma: diffusers' `EulerDiscreteScheduler._sigma_to_t`, vectorised.

    Linear interpolation of tau in log-sigma between neighbouring training timesteps, clamped to
    [0, T-1] (sigmas below the smallest trained level are conditioned as tau = 0). Same float32
    arithmetic as the scheduler, so a table sigma gives back its integer timestep exactly, and the
    timesteps we feed the UNet for a custom schedule are the ones the pipeline feeds it for `sigmas=`.
    """
    log_table = torch.log(table.to(torch.float32)).to(sigma_ve.device)  # [T]
    log_sigma = torch.log(torch.clamp(sigma_ve.to(torch.float32), min=1e-10))
    flat = log_sigma.reshape(-1)
    dists = flat[None, :] - log_table[:, None]  # [T, M]
    low_idx = torch.cumsum((dists >= 0).to(torch.int64), dim=0).argmax(dim=0).clamp(max=log_table.shape[0] - 2)
    high_idx = low_idx + 1
    low, high = log_table[low_idx], log_table[high_idx]
    w = ((low - flat) / (low - high)).clamp(0, 1)
    t = (1 - w).to(torch.float64) * low_idx + w.to(torch.float64) * high_idx
    return t.to(torch.float32).reshape(sigma_ve.shape)


def ve_sigmas_from_timesteps(timesteps: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """VE sigma of (possibly fractional) timesteps: log-linear interpolation of the table.

    The exact inverse of `timesteps_from_ve_sigmas` on [0, T-1]; at integer timesteps it returns the
    table entry itself, i.e. what EulerDiscreteScheduler's default ("linear" interpolation of integer
    timesteps) produces.
    """
    tau = timesteps.to(torch.float64)
    log_table = torch.log(table.to(torch.float64)).to(tau.device)
    T = log_table.shape[0]
    if (tau < 0).any() or (tau > T - 1).any():
        raise ScheduleError(f"timesteps must lie in [0, {T - 1}]")
    low = tau.floor().clamp(max=T - 2).long()
    w = tau - low
    out = torch.exp((1 - w) * log_table[low] + w * log_table[low + 1])
    exact = w == 0
    out = torch.where(exact, table.to(torch.float64).to(tau.device)[low], out)
    return out.to(torch.float32)

"""`oss[:M]`: Optimal Stepsize Sampling."""

from __future__ import annotations

from typing import Callable

import torch

from jsbench.schedule import check_sigmas
from jsbench.zoo.cache import cached_row, train_items
from jsbench.zoo.clock import ZooError, digest
from jsbench.zoo.registry import constant_source, register_zoo

__all__ = ["oss_search", "oss_sigmas", "velocity_fn"]


def velocity_fn(backbone) -> tuple[Callable, torch.dtype]:
    """(f, dtype): f(x [R, ...], sigma [R], cond) -> the flow velocity [R, ...] of the backbone's model
    (guidance included), the protocol's `velocity`, and `dtype`, the precision the backbone's own sampler keeps
    its state in (`velocity_dtype`: float64 for the embedded world, float32 otherwise)."""
    if backbone.velocity is None:
        raise ZooError(f"oss: needs the velocity of a flow-matching backbone (analytic, scenes-dit, sd35, flux); {backbone.name} has none")
    return backbone.velocity, backbone.velocity_dtype


@torch.no_grad()
def oss_search(backbone, cond, x_T: torch.Tensor, steps: int, teacher: torch.Tensor, chunk: int | None = None) -> tuple[torch.Tensor, float]:
    """Optimal Stepsize Sampling (Pu et al., bebebe666/OptimalSteps), one schedule for a batch.

    `teacher` [M+1] is the teacher's schedule (the backbone's default at M steps, 1 -> 0). The teacher
    trajectory x^T_p is Euler along it. cost(k, q) is the mean squared distance between the teacher's
    state at grid point q and the student's state there after exactly k steps, where the student's state
    at (k, q) is the one-step Euler extrapolation from the best state at (k - 1, p), p < q, the state
    that lands closest to the teacher (the reference implementation's recursion). The schedule is the
    path of (N, M): the N-step student whose endpoint best matches the teacher's. Each student path uses
    exactly N strictly decreasing grid points, so the result is valid by construction.
    Returns (sigmas [N+1] float32, endpoint cost).
    """
    from jsbench.backbones.base import eval_batch_size

    velocity, work = velocity_fn(backbone)
    chunk = chunk or eval_batch_size(backbone)  # rows per model call: what the backbone declares fits in memory
    M = teacher.numel() - 1
    if not 1 <= steps <= M:
        raise ZooError(f"oss: {steps} student steps need a teacher with at least as many steps (teacher has {M})")
    grid = teacher.to(torch.float32).cpu().to(work)  # the float32 sigmas the sampler would run
    B = x_T.shape[0]
    x0 = x_T.to(work)

    def vel(states: torch.Tensor, sig: torch.Tensor, reps: int) -> torch.Tensor:
        out = []
        idx = torch.arange(B).repeat(reps)
        for start in range(0, states.shape[0], chunk):
            sl = slice(start, start + chunk)
            out.append(velocity(states[sl], sig[sl].to(torch.float32), cond.take(idx[sl])).to(states.device, work))
        return torch.cat(out)

    # the teacher trajectory: traj[p] is the state at grid[p]
    traj = [x0]
    for p in range(M):
        v = vel(traj[-1], grid[p].expand(B), 1)
        traj.append(traj[-1] + (grid[p + 1] - grid[p]) * v)
    traj = torch.stack(traj)  # [M+1, B, ...]
    states = {0: x0}  # level 0: only the start is reachable
    parents: list[dict[int, int]] = []
    best_cost = {0: 0.0}
    for k in range(1, steps + 1):
        last = M - (steps - k)  # leave one grid point for each remaining step
        sources = sorted(states)
        stacked = torch.cat([states[p] for p in sources])
        sig = torch.cat([grid[p].expand(B) for p in sources])
        v_all = vel(stacked, sig, len(sources)).view(len(sources), *x0.shape)
        cost = torch.full((M + 1,), float("inf"), dtype=torch.float64)
        parent: dict[int, int] = {}
        new_states: dict[int, torch.Tensor] = {}
        for si, p in enumerate(sources):
            lo = p + 1 if k < steps else M
            targets = list(range(lo, last + 1))
            if not targets:
                continue
            dt = (grid[targets] - grid[p]).view(-1, *([1] * x0.dim()))
            land = states[p][None] + dt * v_all[si][None]  # [Q, B, ...]
            c = (land - traj[targets]).pow(2).mean(dim=tuple(range(1, land.dim()))).to(torch.float64).cpu()  # one host copy, not one per target
            for qi, q in enumerate(targets):
                if c[qi] < cost[q]:
                    cost[q] = c[qi]
                    parent[q] = p
                    new_states[q] = land[qi].clone()  # a view would keep the whole [Q, B, ...] land tensor alive
        if not new_states:
            raise ZooError(f"oss: no {k}-step path on a {M}-step teacher")
        parents.append(parent)
        states = new_states
        best_cost = {q: float(cost[q]) for q in new_states}
    path = [M]
    for k in range(steps, 0, -1):
        path.append(parents[k - 1][path[-1]])
    path = path[::-1]  # grid indices from 0 (noise) to M (clean)
    row = grid[path].to(torch.float32)
    row[0], row[-1] = 1.0, 0.0
    check_sigmas(row[None])
    return row, best_cost[M]


def oss_sigmas(backbone, suite, steps: int, teacher_steps: int | None = None, prompts: int = 16, seeds: int = 2, log=None) -> torch.Tensor:
    """The cached OSS schedule of this backbone at N steps, computed on `prompts` training prompts x `seeds`."""
    if suite is None:
        raise ZooError("oss is computed on a suite's training prompts; this command has no suite")
    M = int(teacher_steps or backbone.ceiling_steps)
    if M < steps:
        raise ZooError(f"oss: the teacher ({M} steps) must have at least the student's {steps} steps")
    items = train_items(suite, prompts)
    seed_list = list(range(50_000, 50_000 + seeds))
    teacher = backbone.default_sigmas(M, torch.zeros(1, 1))[0].detach().cpu()
    key = {"model_id": backbone.model_id, "teacher_steps": M, "teacher": digest(teacher), "prompts": [it.prompt for it in items],
           "seeds": seed_list, "version": 1}

    def compute():
        rows = [(it.prompt, s) for it in items for s in seed_list]
        cond = backbone.encode([p for p, _ in rows])
        x_T = backbone.initial_noise([s for _, s in rows])
        row, cost = oss_search(backbone, cond, x_T, steps, teacher)
        return row, {"endpoint_mse": cost, "method": "OSS (Pu et al. 2025): DP over the teacher's timesteps"}

    return cached_row("oss", backbone, suite.name, steps, key, compute, log)



def _available(backbone, steps: int) -> None:
    velocity_fn(backbone)


@register_zoo("oss", available=_available)
def _build(spec: str, backbone, steps: int, suite=None, log=None):
    arg = spec.partition(":")[2]
    teacher = None
    if arg:
        if not arg.isdigit() or int(arg) < 1:
            raise ZooError(f"bad schedule {spec!r}: oss:M takes the teacher's step count, e.g. oss:200")
        teacher = int(arg)
    return constant_source("oss", oss_sigmas(backbone, suite, steps, teacher_steps=teacher, log=log))

"""Optimal Stepsize Sampling (Pei, Hu & Gu, "Optimal Stepsize for Diffusion Sampling", arXiv 2503.21774;
code: github.com/bebebe666/OptimalSteps, `OSS/OSS.py`), as three zoo rows.

    oss[:M]        the authors' recipe: one DP per training sample (`search_OSS`), then the per-position
                   median of the sampled step indices as `cal_medium` computes it (the two middle values
                   of the sorted column averaged with integer division, also for odd counts)
    oss-image[:M]  the authors' per-image search (their Flux and DiT `--search_each` scripts): the DP on
                   each evaluated image's own teacher trajectory; an instance-level oracle by the
                   teacher-matching criterion, costing a teacher trajectory and (N+1)·M model calls an image
    oss-mean[:M]   jsbench's earlier variant: one DP on the batch-mean cost, from sigma 1, exactly N steps

The reference DP (`oss_paths`), in its own terms: the teacher runs M Euler steps along the backbone's
default M-step schedule. Level k = 1..N keeps, for every teacher grid point q, the best state reachable
there in k steps and its cost, the mean squared distance to the teacher's state at q. A step from
source p to q > p is one Euler step from p's kept state with the velocity at p's level. Three
behaviours of the reference are kept: (1) free start: at level 1 the source may be any grid point p,
its state the initial noise entered at the teacher's time p (so a row's first level may lie below 1;
the flow backbones run such a row from x_T at that level); the noise stays a source at every level;
(2) a level's costs start from the previous level's, so a point keeps its fewer-step state unless k
steps land strictly closer; (3) the trace-back reads level k's parent table for the k-th step, so where a
point kept a fewer-step state the traced path is not the one whose cost the DP kept (measured on 32
training samples at 3 steps, M = 200: 18 of 32 on analytic, 14 of 32 on detail; their traced rows reach
the teacher's endpoint with mean squared error 0.0038 and 0.0069 where the DP's costs say 0.0019 and
0.0043), and it could repeat the first grid point (a zero-length step, refused here; not seen). Ties keep the
source nearest the noise (the reference visits sources from the noise on and replaces only on a strictly
lower cost). The DP keeps one state per grid point, so it is not a search over all N-step subsets.

Teacher step counts follow the reference scripts where they state them (`REFERENCE_TEACHER_STEPS`:
Flux-dev 100 in scripts/flux.sh), else the backbone's `ceiling_steps`. The reference's amplitude
renormalisation is not used: only its class-conditional DiT script turns it on, with quantile tables
measured on DiT-XL/2's latents, and it changes the sampler (the state is rescaled before every model
call), not the schedule; its text-to-image (Flux) pipeline runs without it, as jsbench does.
"""

from __future__ import annotations

from typing import Callable

import torch

from jsbench.schedule import check_sigmas
from jsbench.zoo import kept_searches
from jsbench.zoo.cache import cached_row, train_items
from jsbench.zoo.clock import ZooError, digest
from jsbench.zoo.registry import constant_source, register_zoo

__all__ = [
    "REFERENCE_TEACHER_STEPS",
    "velocity_fn",
    "teacher_trajectory",
    "oss_paths",
    "OssSearch",
    "reference_median",
    "path_sigmas",
    "oss_mean_search",
    "oss_sigmas",
    "oss_mean_sigmas",
    "oss_image_source",
]

#: teacher step counts the reference's scripts use, by backbone (scripts/flux.sh: FLUX.1-dev, 100)
REFERENCE_TEACHER_STEPS = {"flux-dev": 100}


def velocity_fn(backbone) -> tuple[Callable, torch.dtype]:
    """(f, dtype): f(x [R, ...], sigma [R], cond) -> the flow velocity [R, ...] of the backbone's model
    (guidance included), the protocol's `velocity`, and `dtype`, the precision the backbone's own sampler keeps
    its state in (`velocity_dtype`: float64 for the embedded world, float32 otherwise)."""
    if backbone.velocity is None:
        raise ZooError(f"oss: needs the velocity of a flow-matching backbone (analytic, scenes-dit, sd35, flux); {backbone.name} has none")
    return backbone.velocity, backbone.velocity_dtype


def teacher_steps_for(backbone, teacher_steps: int | None, steps: int) -> int:
    """The teacher's step count: the one asked for, else the reference scripts' for this model, else the
    backbone's many-step ceiling."""
    M = int(teacher_steps or REFERENCE_TEACHER_STEPS.get(backbone.name) or backbone.ceiling_steps)
    if M < steps:
        raise ZooError(f"oss: the teacher ({M} steps) must have at least the student's {steps} steps")
    return M


def teacher_grid(teacher: torch.Tensor, x_T: torch.Tensor, work: torch.dtype) -> torch.Tensor:
    """The teacher's levels [M+1] as the sampler runs them (float32), in `work` precision on x_T's device."""
    return teacher.to(x_T.device, torch.float32).to(work)


def _velocity_rows(backbone, velocity: Callable, cond, batch: int, work: torch.dtype, chunk: int | None) -> Callable:
    """v(states [R, ...], sigmas [R]) for R = a multiple of the batch, row r belonging to sample r % batch;
    evaluated `chunk` rows per model call (what the backbone declares fits in memory)."""
    from jsbench.backbones.base import eval_batch_size

    chunk = chunk or eval_batch_size(backbone)

    def vel(states: torch.Tensor, sig: torch.Tensor) -> torch.Tensor:
        idx = torch.arange(states.shape[0]) % batch
        out = []
        for start in range(0, states.shape[0], chunk):
            sl = slice(start, start + chunk)
            out.append(velocity(states[sl], sig[sl].to(torch.float32), cond.take(idx[sl])).to(states.device, work))
        return torch.cat(out)

    return vel


def teacher_trajectory(vel: Callable, x0: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """The teacher's Euler states [M+1, B, ...] along `grid`, starting from x0 at grid[0]."""
    traj = [x0]
    for p in range(grid.numel() - 1):
        v = vel(traj[-1], grid[p].expand(x0.shape[0]))
        traj.append(traj[-1] + (grid[p + 1] - grid[p]) * v)
    return torch.stack(traj)


@torch.no_grad()
def oss_paths(backbone, cond, x_T: torch.Tensor, steps: int, teacher: torch.Tensor, free_start: bool = True,
              chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference DP (`search_OSS`, see the module docstring) run for every sample of the batch at once.

    `teacher` [M+1]: the teacher's schedule, 1 -> 0. `free_start=False` lets level 1 start only from the
    noise at the teacher's first level (1). Returns (paths [B, N+1] long: the teacher grid indices each
    sample's N steps run through, 0 = the teacher's first level, M = its end; endpoint costs [B] float64).
    Every tensor is built on x_T's device.

    Level k of the DP does not depend on the step count asked for (N only picks where the trace-back
    starts), so within `shared_searches` a search is kept and a later call on the same batch with another N
    reads its levels or adds the missing ones: `compare --steps 3 --steps 5` runs one teacher and five levels
    per image instead of two teachers and eight levels, with the same bits as separate searches.
    """
    M = teacher.numel() - 1
    if not 1 <= steps <= M:
        raise ZooError(f"oss: {steps} student steps need a teacher with at least as many steps (teacher has {M})")
    memo = kept_searches.active() if x_T.device.type == "cpu" else None  # kept searches live in host memory
    key = kept_searches.batch_key(cond, x_T, teacher, free_start, chunk) if memo is not None else None
    search = memo.find(backbone, key) if memo is not None else None
    if search is None:
        search = OssSearch(backbone, cond, x_T, teacher, free_start, chunk)
    while search.levels < steps:
        search.advance()
    if memo is not None:
        memo.keep(backbone, key, search)  # at its size now, its levels added
    return search.paths(steps)


class OssSearch:
    """`oss_paths`' DP on one batch, a level at a time: the teacher trajectory, then per level every grid
    point's kept state, cost and parent. `advance` adds a level; `paths(N)` traces back from level N."""

    def __init__(self, backbone, cond, x_T: torch.Tensor, teacher: torch.Tensor, free_start: bool = True, chunk: int | None = None):
        velocity, work = velocity_fn(backbone)
        self.free_start = free_start
        self.M = M = teacher.numel() - 1
        self.dev = dev = x_T.device
        self.grid = teacher_grid(teacher, x_T, work)
        B = self.B = x_T.shape[0]
        self.x0 = x0 = x_T.to(work)
        self.vel = _velocity_rows(backbone, velocity, cond, B, work, chunk)
        self.traj = teacher_trajectory(self.vel, x0, self.grid).transpose(0, 1)  # [B, M+1, ...]
        self.states = x0[:, None].expand(B, M + 1, *x0.shape[1:]).clone()  # every point holds the noise until reached
        self.cost = torch.full((B, M + 1), float("inf"), dtype=torch.float64, device=dev)
        self.parents: list[torch.Tensor] = []  # level k's parent table
        self.end_costs: list[torch.Tensor] = []  # level k's cost at the teacher's end point, [B]
        self.per_call = max(1, 2**24 // max(1, x0[0].numel() * B))  # targets per landing tensor [B, Q, ...]

    @property
    def levels(self) -> int:
        return len(self.parents)

    def nbytes(self) -> int:
        held = (self.traj, self.states, self.x0, self.grid, self.cost, *self.parents, *self.end_costs)
        return sum(t.numel() * t.element_size() for t in held)

    def advance(self) -> None:
        """Add level k = `levels` + 1."""
        M, B, dev, x0, grid, per_call, traj = self.M, self.B, self.dev, self.x0, self.grid, self.per_call, self.traj
        states, cost = self.states, self.cost.clone()  # kept as it was until the level is complete
        feat = tuple(range(2, traj.dim()))
        trail = [1] * (x0.dim() - 1)
        sources = list(range(M)) if (self.free_start or self.levels > 0) else [0]
        src = torch.tensor(sources, device=dev)
        v = self.vel(states[:, src].transpose(0, 1).reshape(-1, *x0.shape[1:]), grid[src].repeat_interleave(B))
        v = v.view(len(sources), B, *x0.shape[1:])
        # a point not reached at this level keeps the last level's parent; before the first, the noise (0)
        parent = self.parents[-1].clone() if self.parents else torch.zeros(B, M + 1, dtype=torch.long, device=dev)
        reached = torch.zeros(B, M + 1, dtype=torch.bool, device=dev)  # points a source of this step lands nearer
        # one landing buffer for every block, written in place (fresh [B, Q, ...] tensors cost more in page faults
        # than their arithmetic); a block's view of it is contiguous, as a fresh tensor would be, so its mean
        # reduces in the same order
        scratch = torch.empty(B * min(per_call, M) * x0[0].numel(), dtype=x0.dtype, device=dev)
        for si, p in enumerate(sources):
            for lo in range(p + 1, M + 1, per_call):
                hi = min(lo + per_call, M + 1)
                dt = (grid[lo:hi] - grid[p]).view(1, -1, *trail)
                land = scratch[: B * (hi - lo) * x0[0].numel()].view(B, hi - lo, *x0.shape[1:])
                torch.mul(dt, v[si][:, None], out=land).add_(states[:, p, None])  # the Euler landing, [B, Q, ...]
                c = land.sub_(traj[:, lo:hi]).pow_(2).mean(dim=feat).to(torch.float64)
                better = c < cost[:, lo:hi]  # strictly lower: ties keep the source nearer the noise
                cost[:, lo:hi] = torch.where(better, c, cost[:, lo:hi])
                parent[:, lo:hi] = torch.where(better, torch.full_like(parent[:, lo:hi], p), parent[:, lo:hi])
                reached[:, lo:hi] |= better
        # each point reached this step takes the landing from its best source, the same operations on the same
        # operands as when its cost was measured (so the same bits); the others keep their state
        slot = torch.zeros(M + 1, dtype=torch.long, device=dev)  # a source's row of v
        slot[src] = torch.arange(len(sources), device=dev)
        rows = torch.arange(B, device=dev)[:, None]
        nxt = states.clone()
        for lo in range(1, M + 1, per_call):
            hi = min(lo + per_call, M + 1)
            best = parent[:, lo:hi]
            dt = (grid[lo:hi] - grid[best]).view(B, hi - lo, *trail)
            landed = torch.mul(dt, v[slot[best], rows]).add_(states[rows, best])
            nxt[:, lo:hi] = torch.where(reached[:, lo:hi].view(B, hi - lo, *trail), landed, nxt[:, lo:hi])
        self.parents.append(parent)
        self.end_costs.append(cost[:, M].clone())
        self.states, self.cost = nxt, cost

    def paths(self, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(paths [B, N+1], endpoint costs [B]) of N = `steps` levels, traced back from the teacher's end."""
        paths = torch.empty(self.B, steps + 1, dtype=torch.long, device=self.dev)
        paths[:, steps] = self.M
        for k in range(steps - 1, -1, -1):
            paths[:, k] = self.parents[k].gather(1, paths[:, k + 1 : k + 2])[:, 0]
        return paths, self.end_costs[steps - 1].clone()


def reference_median(paths: torch.Tensor) -> torch.Tensor:
    """The reference's `cal_medium` of per-sample paths [B, N+1] -> one path [N+1].

    The reference counts teacher indices from the clean end (i = M - g); per step position it sorts the
    B values and takes (l[B // 2] + l[B // 2 - 1]) // 2, in its own indices: for odd B that is not the
    median, and the integer division rounds towards the clean end."""
    M = int(paths[:, -1].max())
    ref = (M - paths).sort(dim=0).values  # [B, N+1], each column sorted
    B = ref.shape[0]
    mid = torch.div(ref[B // 2] + ref[B // 2 - 1], 2, rounding_mode="floor")
    return M - mid


def path_sigmas(paths: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Grid-index paths [..., N+1] -> their sigma rows [..., N+1] float32 (the teacher's float32 levels)."""
    grid = teacher.to(paths.device, torch.float32)
    rows = grid[paths]
    rows[..., -1] = 0.0
    return rows


@torch.no_grad()
def oss_mean_search(backbone, cond, x_T: torch.Tensor, steps: int, teacher: torch.Tensor, chunk: int | None = None) -> tuple[torch.Tensor, float]:
    """`oss-mean`: OSS's recursion run once on the batch-mean cost, from sigma 1, with exactly N steps.

    Not the authors' recipe (that is `oss_paths` + `reference_median`): one DP for the whole batch, whose
    cost(k, q) is the batch-mean squared distance between the teacher's state at grid point q and the
    student's state there after exactly k steps; the student's state at (k, q) is the one-step Euler
    extrapolation from the kept state at (k - 1, p), p < q, the one that lands closest to the teacher. The
    schedule is the path kept at (N, M): every path uses exactly N strictly decreasing grid points and
    starts at the teacher's first level (1), so the row is valid by construction. The DP keeps one
    landing per grid point, so this is not a search over all N-step subsets.
    Returns (sigmas [N+1] float32 on the CPU, endpoint cost).
    """
    velocity, work = velocity_fn(backbone)
    M = teacher.numel() - 1
    if not 1 <= steps <= M:
        raise ZooError(f"oss: {steps} student steps need a teacher with at least as many steps (teacher has {M})")
    grid = teacher_grid(teacher, x_T, work)
    B = x_T.shape[0]
    x0 = x_T.to(work)
    vel = _velocity_rows(backbone, velocity, cond, B, work, chunk)
    traj = teacher_trajectory(vel, x0, grid)  # [M+1, B, ...]
    states = {0: x0}  # level 0: only the start is reachable
    parents: list[dict[int, int]] = []
    best_cost = {0: 0.0}
    for k in range(1, steps + 1):
        last = M - (steps - k)  # leave one grid point for each remaining step
        sources = sorted(states)
        stacked = torch.cat([states[p] for p in sources])
        sig = torch.cat([grid[p].expand(B) for p in sources])
        v_all = vel(stacked, sig).view(len(sources), *x0.shape)
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
    row = grid[path].to("cpu", torch.float32)
    row[0], row[-1] = 1.0, 0.0
    check_sigmas(row[None])
    return row, best_cost[M]




def _seeds(count: int, base: int) -> list[int]:
    return list(range(base, base + count))


def _training_rows(name: str, backbone, suite, steps: int, teacher_steps: int | None, prompts: int, seeds: int, recipe: str):
    """What `oss` and `oss-mean` are fitted on: (teacher steps M, the teacher's sigmas [M+1] on the CPU, the
    (prompt, noise seed) rows: `prompts` training prompts x `seeds` noises each, seeds 50000, 50001, ... so no
    row shares a noise, and the cache key naming them and `recipe`)."""
    if suite is None:
        raise ZooError(f"{name} is computed on a suite's training prompts; this command has no suite")
    M = teacher_steps_for(backbone, teacher_steps, steps)
    items = train_items(suite, prompts)
    rows = [(it.prompt, s) for it, s in zip((it for it in items for _ in range(seeds)), _seeds(len(items) * seeds, 50_000))]
    teacher = backbone.default_sigmas(M, torch.zeros(1, 1))[0].detach().cpu()
    key = {"model_id": backbone.model_id, "teacher_steps": M, "teacher": digest(teacher), "prompts": [it.prompt for it in items],
           "seeds": [s for _, s in rows], "recipe": recipe, "version": 2}
    return M, teacher, rows, key


def oss_sigmas(backbone, suite, steps: int, teacher_steps: int | None = None, prompts: int = 16, seeds: int = 2, log=None) -> torch.Tensor:
    """`oss`: the authors' recipe on `prompts` training prompts x `seeds` noises (each row its own noise):
    one reference DP per sample, then the reference's per-position median. Cached; [N+1] float32."""
    M, teacher, rows, key = _training_rows("oss", backbone, suite, steps, teacher_steps, prompts, seeds,
                                           "per-sample DP, free start, cal_medium")

    def compute():
        cond = backbone.encode([p for p, _ in rows])
        x_T = backbone.initial_noise([s for _, s in rows])
        paths, costs = oss_paths(backbone, cond, x_T, steps, teacher)
        median = reference_median(paths)
        row = path_sigmas(median, teacher).cpu()
        starts = teacher.to(paths.device)[paths[:, 0]]
        return row, {
            "method": "OSS (Pei, Hu & Gu 2025, arXiv 2503.21774): the reference's per-sample DP over the teacher's "
                      "timesteps (free start), then its per-position median (cal_medium)",
            "teacher_steps": M, "median_path": median.tolist(), "sample_paths": paths.tolist(),
            "sample_endpoint_mse_mean": float(costs.mean()),
            "sample_start_sigma_range": [float(starts.min()), float(starts.max())],
        }

    return cached_row("oss", backbone, suite.name, steps, key, compute, log, free_start=True)


def oss_mean_sigmas(backbone, suite, steps: int, teacher_steps: int | None = None, prompts: int = 16, seeds: int = 2, log=None) -> torch.Tensor:
    """`oss-mean`: one DP on the batch-mean cost (`oss_mean_search`) on the same training rows as `oss`."""
    M, teacher, rows, key = _training_rows("oss-mean", backbone, suite, steps, teacher_steps, prompts, seeds,
                                           "batch-mean DP from sigma 1, exactly N steps")

    def compute():
        cond = backbone.encode([p for p, _ in rows])
        x_T = backbone.initial_noise([s for _, s in rows])
        row, cost = oss_mean_search(backbone, cond, x_T, steps, teacher)
        return row, {"endpoint_mse": cost, "teacher_steps": M,
                     "method": "OSS's DP (Pei, Hu & Gu 2025) on the batch-mean cost, from sigma 1, exactly N steps (not the authors' recipe)"}

    return cached_row("oss-mean", backbone, suite.name, steps, key, compute, log)


def oss_image_source(backbone, steps: int, teacher_steps: int | None = None):
    """`oss-image`: (label, make, checksum); make(x_T, cond) runs the reference DP on each row's own
    teacher trajectory and returns its own row [B, N+1] (free start), on x_T's device."""
    velocity_fn(backbone)
    M = teacher_steps_for(backbone, teacher_steps, steps)
    teacher = backbone.default_sigmas(M, torch.zeros(1, 1))[0].detach().cpu()

    def make(x, c):
        paths, _ = oss_paths(backbone, c, x, steps, teacher)
        return path_sigmas(paths, teacher).to(x.device, torch.float32)

    return "oss-image", make, digest(torch.cat([teacher, torch.tensor([float(steps), 1.0])]))


def applies(cls) -> None:
    """ScheduleKind.applies of the oss rows: a backbone class with a flow velocity (`velocity`); ZooError otherwise."""
    velocity_fn(cls)


def _available(backbone, steps: int) -> None:
    velocity_fn(backbone)


def _teacher_arg(spec: str) -> int | None:
    kind, _, arg = spec.partition(":")
    if not arg:
        return None
    if not arg.isdigit() or int(arg) < 1:
        raise ZooError(f"bad schedule {spec!r}: {kind}:M takes the teacher's step count, e.g. {kind}:200")
    return int(arg)


def _oss_nfe_per_row(student: int, teacher: int) -> int:
    """Velocity calls per row of `oss_paths` (the per-sample DP, free start): the teacher trajectory (M), then
    every teacher grid point but the last as a source at each of the N levels."""
    return teacher + student * teacher


def _oss_mean_nfe_per_row(student: int, teacher: int) -> int:
    """Velocity calls per row of `oss_mean_search` (one schedule for the batch's mean cost): the teacher
    trajectory (M), then one call per reachable state of each DP level (1 at the first, M - N + 1 after)."""
    return teacher + 1 + (student - 1) * (teacher - student + 1)


def teacher_cost(spec: str, steps: int, cls, cost, images: int = 0) -> tuple[int, str]:
    """(extra NFE, note) for `--plan` (ScheduleKind.teacher): oss and oss-mean once on the training prompts,
    oss-image on every evaluated image. `cls`: the backbone's class; `cost`: plan.CostModel."""
    import inspect

    kind, _, arg = spec.partition(":")
    teacher = teacher_steps_for(cls, int(arg) if arg else None, steps)
    if kind in ("oss", "oss-mean"):
        params = inspect.signature(oss_sigmas if kind == "oss" else oss_mean_sigmas).parameters
        rows = params["prompts"].default * params["seeds"].default
        per_row = (_oss_nfe_per_row if kind == "oss" else _oss_mean_nfe_per_row)(steps, teacher)
        return rows * per_row * cost.cfg_batch, f"+ {teacher}-step teacher and DP search on {rows} rows, once"
    return images * _oss_nfe_per_row(steps, teacher) * cost.cfg_batch, f"+ {teacher}-step teacher and DP search per image"


@register_zoo("oss", available=_available)
def _build_oss(spec: str, backbone, steps: int, suite=None, log=None):
    return constant_source("oss", oss_sigmas(backbone, suite, steps, teacher_steps=_teacher_arg(spec), log=log))


@register_zoo("oss-mean", available=_available)
def _build_oss_mean(spec: str, backbone, steps: int, suite=None, log=None):
    return constant_source("oss-mean", oss_mean_sigmas(backbone, suite, steps, teacher_steps=_teacher_arg(spec), log=log))


def _image_opt_in(backbone) -> str | None:
    """oss-image is in compare's default zoo on the embedded worlds only (their velocity is closed-form)."""
    from jsbench.backbones.analytic import AnalyticBackbone

    if isinstance(backbone, AnalyticBackbone):
        return None
    return (f"on {backbone.name} it costs a teacher trajectory and a DP, about (N+1)*M model calls, per evaluated "
            "image; name it in --zoo to run it")


@register_zoo("oss-image", available=_available, opt_in=_image_opt_in)
def _build_oss_image(spec: str, backbone, steps: int, suite=None, log=None):
    return oss_image_source(backbone, steps, teacher_steps=_teacher_arg(spec))

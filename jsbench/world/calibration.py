"""Searched schedules on the embedded world: the frame every learned number is read in.

For a step budget N, a fixed candidate set of schedules is scored on every (prompt, seed) pair; the
best global schedule and the best schedule per prompt are *chosen* on search seeds and *reported* on
fresh seeds, so the table measures headroom, not best-of-n luck.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from jsbench.backbones.analytic import AnalyticBackbone
from jsbench.rewards.geneval import evaluate_detections
from jsbench.schedule import shifted_sigmas, sigmas_from_increments, uniform_sigmas
from jsbench.world.detect import detect


def candidate_schedules(steps: int, random_count: int = 120, seed: int = 0) -> torch.Tensor:
    """[C, N+1]: a grid of interior points for N <= 3, shifted grids, and Dirichlet draws around uniform."""
    rows = [uniform_sigmas(steps)[0]]
    rows += [shifted_sigmas(steps, float(s))[0] for s in torch.logspace(-1.3, 1.0, 24)]
    if steps == 2:
        rows += [torch.tensor([1.0, t, 0.0]) for t in torch.linspace(0.04, 0.96, 24).tolist()]
    if steps == 3:
        grid = torch.linspace(0.04, 0.96, 20).tolist()
        rows += [torch.tensor([1.0, a, b, 0.0]) for a, b in itertools.combinations(sorted(grid, reverse=True), 2)]
    gen = torch.Generator().manual_seed(seed)
    if random_count:
        conc = torch.full((random_count, steps), 1.5)
        inc = torch.distributions.Dirichlet(conc).sample() if False else _dirichlet(conc, gen)
        rows += list(sigmas_from_increments(0.01 / steps + (1 - 0.01) * inc))
    return torch.stack([r.to(torch.float32) for r in rows])


def _dirichlet(conc: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    gammas = torch._standard_gamma(conc) if gen is None else _gamma(conc, gen)
    return gammas / gammas.sum(-1, keepdim=True)


def _gamma(conc: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    # Marsaglia-Tsang via a seeded generator (torch's gamma sampler takes no generator)
    d = conc - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    out = torch.empty_like(conc)
    todo = torch.ones_like(conc, dtype=torch.bool)
    while todo.any():
        x = torch.randn(conc.shape, generator=gen)
        u = torch.rand(conc.shape, generator=gen)
        v = (1 + c * x) ** 3
        ok = (v > 0) & (torch.log(u.clamp_min(1e-30)) < 0.5 * x**2 + d - d * v + d * torch.log(v.clamp_min(1e-30)))
        take = ok & todo
        out[take] = (d * v)[take]
        todo &= ~ok
    return out


@dataclass
class ScoreGrid:
    """correct[c, p, s]: schedule c, prompt p, seed s."""

    correct: torch.Tensor
    prompts: list[dict]


def score_grid(backbone: AnalyticBackbone, metas: list[dict], seeds: list[int], schedules: torch.Tensor, chunk: int = 2048) -> ScoreGrid:
    prompts = [m["prompt"] for m in metas for _ in seeds]
    rows_meta = [m for m in metas for _ in seeds]
    cond = backbone.encode(prompts)
    x_T = backbone.initial_noise([s for _ in metas for s in seeds])
    out = torch.zeros(len(schedules), len(metas), len(seeds))
    for c, sig in enumerate(schedules):
        correct = []
        for start in range(0, len(prompts), chunk):
            sl = slice(start, start + chunk)
            sub = cond.take(range(start, min(start + chunk, len(prompts))))
            images = backbone.sample(x_T[sl], sub, sig.expand(len(sub), -1).contiguous())
            dets = detect(images)
            correct += [evaluate_detections(d, m)[0] for d, m in zip(dets, rows_meta[sl])]
        out[c] = torch.tensor(correct, dtype=torch.float32).view(len(metas), len(seeds))
    return ScoreGrid(out, metas)

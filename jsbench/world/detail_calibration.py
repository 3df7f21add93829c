"""Searched schedules on the detail world: how much a per-prompt and a per-instance schedule can add.

As in `jsbench.world.calibration`, every schedule is *chosen* on search seeds and *reported* on fresh
seeds of the same held-out prompts, so the table measures headroom that generalises to new noise, not
best-of-n luck. The detail world's content lives at t ~ 0.01-0.5, so the 3-step candidates are every
pair (t1 > t2) of a log-spaced grid, plus the default and the uniform schedule.

- searched global: one schedule for every prompt and noise;
- searched per prompt: one schedule per prompt;
- searched per instance: one schedule per (prompt, noise mode), where the noise mode is what the world
  says the initial noise decides (`noise_mode`: which texture an open prompt's sample becomes; one mode
  for the other prompts). It is a function of x_T that a policy can compute, so it is an honest
  instance-level schedule, not an oracle per noise.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

import torch

from jsbench.schedule import check_sigmas, uniform_sigmas
from jsbench.stats import mean_stderr
from jsbench.world.detail import OPEN_PHRASES, noise_mode


def candidate_grid(points: int = 12, low: float = 0.008, high: float = 0.8) -> torch.Tensor:
    """[C, 4] three-step schedules: every pair t1 > t2 of `points` log-spaced times in [low, high]."""
    grid = torch.logspace(math.log10(low), math.log10(high), points, dtype=torch.float64).tolist()
    rows = [[1.0, a, b, 0.0] for a, b in itertools.combinations(sorted(grid, reverse=True), 2)]
    return torch.tensor(rows, dtype=torch.float32)


def score_rows(backbone, suite, items: list, seeds: list[int], sigmas: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """The suite's primary per-image metric [R] (the geneval suite's `correct`) for rows (items[r], seeds[r])
    sampled along sigmas[r] ([R, N+1], or [N+1] for all). The caller passes the suite (the world imports
    none): `load_suite("geneval", backbone)` scores with the detail world's detector and GenEval's rules."""
    if sigmas.dim() == 1:
        sigmas = sigmas.expand(len(items), -1)
    check_sigmas(sigmas)  # as evaluation checks: a zero step never reaches the sampler
    metric = suite.primary_metric
    out = []
    for start in range(0, len(items), chunk):
        part = slice(start, start + chunk)
        prompts = [it.prompt for it in items[part]]
        images = backbone.sample(backbone.initial_noise(seeds[part]), backbone.encode(prompts), sigmas[part].contiguous())
        out += [float(sc[metric]) for sc in suite.score(images, items[part])]
    return torch.tensor(out)


@dataclass
class DetailCalibration:
    steps: int
    n_prompts: int
    n_open_prompts: int
    search_seeds: int
    report_seeds: int
    candidates: int
    ceiling_steps: int
    rows: dict = field(default_factory=dict)  # method -> {"all": (mean, se), "open": ..., "closed": ...}
    gains: dict = field(default_factory=dict)  # "A - B" -> {"all"/"open": (mean, se)} paired over prompts
    global_schedule: list[float] = field(default_factory=list)
    per_prompt_schedules: dict = field(default_factory=dict)  # prompt -> [t1, t2]
    per_instance_schedules: dict = field(default_factory=dict)  # prompt -> {mode: [t1, t2]} (open prompts)

    def to_dict(self) -> dict:
        return asdict(self)


def calibrate_detail(
    backbone, suite, items: list, search_seeds: int, report_seeds: int, candidates: torch.Tensor, ceiling_steps: int = 200,
    search_base: int = 10_000_000, report_base: int = 20_000_000, log=None,
) -> DetailCalibration:
    """The calibration table at N = candidates.shape[1] - 1 on `items` (the suite's held-out items), scored
    by `suite` (see `score_rows`).

    Every (prompt, seed) row has its own noise (seed = base + row), search and report bases apart: shared
    noises across prompts would let one unlucky detail norm or noise mode steer every prompt's search."""
    steps = candidates.shape[1] - 1
    P, S = len(items), search_seeds
    s_items = [it for it in items for _ in range(S)]
    s_seeds = [search_base + i for i in range(P * S)]
    modes_search = noise_mode(backbone.initial_noise(s_seeds), [it.prompt for it in s_items]).view(P, S)
    score = torch.zeros(len(candidates), P, S)
    for c, sig in enumerate(candidates):
        score[c] = score_rows(backbone, suite, s_items, s_seeds, sig).view(P, S)
        if log and (c + 1) % 10 == 0:
            log(f"  searched {c + 1}/{len(candidates)} candidates")
    per_prompt = score.mean(-1)  # [C, P]
    best_global = int(per_prompt.mean(1).argmax())
    best_prompt = per_prompt.argmax(0)  # [P]
    best_mode = torch.zeros(P, 2, dtype=torch.long)
    for m in range(2):
        hits = (modes_search == m).float()  # [P, S]
        mean_m = (score * hits).sum(-1) / hits.sum(-1).clamp_min(1)  # [C, P]
        # a prompt without noise of this mode among the search seeds falls back to its per-prompt schedule
        best_mode[:, m] = torch.where(hits.sum(-1) > 0, mean_m.argmax(0), best_prompt)

    R = report_seeds
    r_items = [it for it in items for _ in range(R)]
    r_seeds = [report_base + i for i in range(P * R)]
    x_r = backbone.initial_noise(r_seeds)
    modes_report = noise_mode(x_r, [it.prompt for it in r_items])
    prompt_of_row = torch.arange(P).repeat_interleave(R)
    fixed = {
        "default": backbone.default_sigmas(steps, x_r[:1])[0].float().cpu(),
        "uniform": uniform_sigmas(steps)[0].float(),
        "searched global": candidates[best_global],
    }
    results = {name: score_rows(backbone, suite, r_items, r_seeds, sig) for name, sig in fixed.items()}
    results["searched per prompt"] = score_rows(backbone, suite, r_items, r_seeds, candidates[best_prompt[prompt_of_row]])
    results["searched per instance"] = score_rows(backbone, suite, r_items, r_seeds, candidates[best_mode[prompt_of_row, modes_report]])
    if log:
        log(f"  reported; ceiling ({ceiling_steps} steps)")
    results[f"ceiling ({ceiling_steps} steps)"] = score_rows(backbone, suite, r_items, r_seeds, backbone.default_sigmas(ceiling_steps, x_r[:1])[0].float().cpu())

    is_open = torch.tensor([it.metadata["texture"] in OPEN_PHRASES for it in items])
    subsets = {"all": torch.ones(P, dtype=torch.bool), "open": is_open, "closed": ~is_open}
    out = DetailCalibration(
        steps=steps, n_prompts=P, n_open_prompts=int(is_open.sum()), search_seeds=S, report_seeds=R,
        candidates=len(candidates), ceiling_steps=ceiling_steps,
        global_schedule=[round(float(v), 4) for v in candidates[best_global]],
    )
    by_prompt = {name: v.view(P, R).mean(-1) for name, v in results.items()}
    for name, v in by_prompt.items():
        out.rows[name] = {k: mean_stderr(v[mask].double()) for k, mask in subsets.items() if mask.any()}
    for a, b in (("searched per prompt", "searched global"), ("searched per instance", "searched per prompt"), ("searched per instance", "searched global")):
        diff = by_prompt[a] - by_prompt[b]
        out.gains[f"{a} - {b}"] = {k: mean_stderr(diff[mask].double()) for k, mask in subsets.items() if mask.sum() > 1}
    for p, it in enumerate(items):
        out.per_prompt_schedules[it.prompt] = [round(float(v), 4) for v in candidates[best_prompt[p], 1:-1]]
        if is_open[p]:
            out.per_instance_schedules[it.prompt] = {mode: [round(float(v), 4) for v in candidates[best_mode[p, mode], 1:-1]] for mode in (0, 1)}
    return out

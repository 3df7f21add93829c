"""Searched schedules on the embedded world: the frame every learned number is read in.

For a step budget N a fixed candidate set of schedules is scored on every (prompt, seed) pair of the
held-out prompts. The best global schedule and the best schedule per prompt are *chosen* on search
seeds and *reported* on fresh seeds, so the table measures headroom, not best-of-n luck. Images are scored
by the suite the caller passes (`load_suite("geneval", backbone)`: the world's exact detector and GenEval's
rules), on its items, so calibration and evaluation score alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from jsbench.schedule import candidate_schedules, shifted_sigmas, uniform_sigmas
from jsbench.stats import mean_stderr


def score_grid(backbone, suite, items: list, seeds: list[int], schedules: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """score[c, p, s] of schedule c on item p and seed s: the suite's primary per-image metric (the geneval
    suite's `correct`, 1.0 when GenEval's checks pass). The caller passes the suite and its items (the world
    imports no suite); `suite.score(images, items)` scores each chunk of images."""
    prompts = [it.prompt for it in items for _ in seeds]
    row_items = [it for it in items for _ in seeds]
    cond = backbone.encode(prompts)
    x_T = backbone.initial_noise([s for _ in items for s in seeds])
    metric = suite.primary_metric
    out = torch.zeros(len(schedules), len(items), len(seeds))
    for c, sig in enumerate(schedules):
        scores = []
        for start in range(0, len(prompts), chunk):
            idx = list(range(start, min(start + chunk, len(prompts))))
            images = backbone.sample(x_T[idx], cond.take(idx), sig.expand(len(idx), -1).contiguous())
            scores += [sc[metric] for sc in suite.score(images, row_items[start : start + len(idx)])]
        out[c] = torch.tensor(scores, dtype=torch.float32).view(len(items), len(seeds))
    return out


@dataclass
class BudgetRow:
    steps: int
    default: float
    uniform: float
    shift3: float
    searched_global: float
    searched_per_prompt: float
    per_prompt_gain: float
    per_prompt_gain_stderr: float
    ceiling: float
    n_images: int
    global_schedule: list[float]


def calibrate_budget(
    backbone, suite, items: list, steps: int, search_seeds: list[int], report_seeds: list[int], ceiling: float, candidates: dict | None = None
) -> BudgetRow:
    """One row of the calibration table on `items` (the suite's held-out items), scored by `suite`."""
    cands = candidate_schedules(steps, **(candidates or {}))
    search = score_grid(backbone, suite, items, search_seeds, cands).mean(-1)  # [C, P]
    best_global = int(search.mean(1).argmax())
    best_per_prompt = search.argmax(0)  # [P]
    fixed = torch.stack([backbone.default_sigmas(steps, torch.zeros(1, 1))[0].cpu(), uniform_sigmas(steps)[0], shifted_sigmas(steps, 3.0)[0], cands[best_global]])
    report_fixed = score_grid(backbone, suite, items, report_seeds, fixed).mean(-1)  # [4, P]
    per_prompt = torch.stack(
        [score_grid(backbone, suite, [it], report_seeds, cands[int(best_per_prompt[p])][None])[0, 0].mean() for p, it in enumerate(items)]
    )
    gain = per_prompt - report_fixed[3]
    gain_mean, gain_stderr = mean_stderr(gain)  # float32, as scored
    return BudgetRow(
        steps=steps,
        default=float(report_fixed[0].mean()),
        uniform=float(report_fixed[1].mean()),
        shift3=float(report_fixed[2].mean()),
        searched_global=float(report_fixed[3].mean()),
        searched_per_prompt=float(per_prompt.mean()),
        per_prompt_gain=gain_mean,
        per_prompt_gain_stderr=gain_stderr,
        ceiling=ceiling,
        n_images=len(items) * len(report_seeds),
        global_schedule=[round(float(v), 4) for v in cands[best_global]],
    )

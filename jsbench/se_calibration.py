"""SE calibration: do the standard errors jsbench prints cover the spread they claim to measure?

A comparison (default, the zoo rows asked for, every learned row found under `policies/`) is repeated over
replicate seed bases: replicate r evaluates images r*n .. r*n + n-1 of every prompt, so replicates share
no noise. For each paired difference of two rows (a − b, paired on the same images, as the leaderboard's
Δ columns) it reports the spread of the difference over replicates (sample SD), the mean SE the
leaderboard printed for it, and their ratio. A ratio near 1 is a calibrated SE; above 1 the printed SE is
too small. Learned rows keep their training seeds in every replicate, so the spread here is the
evaluation's alone, and a two-level SE (which also counts the training seeds) sits above it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from jsbench import JsbenchError
from jsbench.compare import evaluate_learned_row, shipped_policies
from jsbench.evaluate import evaluate, resolve_schedule
from jsbench.results import paired_metrics

TARGET_RATIO = 1.3
SCHEMA = "jsbench.se_calibration/1"


def replicate_rows(backbone, suite, steps: int, policies_dir: Path, *, seeds: int, seed_base: int, schedules: list[str] = ("default",),
                   batch_size: int | None = None, log: Callable[[str], object] | None = None) -> dict[str, object]:
    """One replicate: label -> EvalRun of each schedule spec and each learned row at `seed_base`."""
    runs = {}
    for spec in schedules:
        source = resolve_schedule(spec, backbone, steps, suite=suite, log=log)
        runs[source.label] = evaluate(backbone, suite, source, seeds, seed_base=seed_base, batch_size=batch_size, progress=False)
    for seed_folders in shipped_policies(policies_dir, backbone.name, steps, suite.name):
        source, run = evaluate_learned_row(backbone, suite, seed_folders, steps, seeds=seeds, seed_base=seed_base, batch_size=batch_size, log=log)
        if source.label in runs:
            raise JsbenchError(f"two rows are labelled {source.label!r} under {policies_dir}/{backbone.name}: rename one")
        runs[source.label] = run
    return runs


def summarise_differences(replicates: list[tuple[int, dict]], suite, pairs: list[tuple[str, str]] | None = None) -> list[dict]:
    """Per paired difference a − b (every pair of rows, or `pairs`): each replicate's Δ and SE (the overall
    of the suite's primary metric, as the leaderboard's Δ columns), the SD of Δ over replicates, the mean
    reported SE and their ratio."""
    metric = suite.primary_metric
    labels = list(replicates[0][1])
    pairs = pairs if pairs is not None else [(a, b) for i, b in enumerate(labels) for a in labels[i + 1 :]]
    out = []
    for a, b in pairs:
        reps = []
        for base, runs in replicates:
            d, se = paired_metrics(suite, runs[a], runs[b])[("overall", metric)]
            reps.append({"seed_base": base, "delta": d, "se": se})
        deltas = [r["delta"] for r in reps]
        m = sum(deltas) / len(deltas)
        spread = math.sqrt(sum((d - m) ** 2 for d in deltas) / (len(deltas) - 1)) if len(deltas) > 1 else math.nan
        mean_se = sum(r["se"] for r in reps) / len(reps)
        ratio = spread / mean_se if mean_se > 0 else (0.0 if spread == 0 else math.inf)
        out.append({"a": a, "b": b, "mean_delta": m, "spread": spread, "mean_se": mean_se, "ratio": ratio,
                    "ok": bool(ratio <= TARGET_RATIO), "train_seeds": [runs_train_seeds(replicates, a), runs_train_seeds(replicates, b)],
                    "replicates": reps})
    return out


def runs_train_seeds(replicates: list[tuple[int, dict]], label: str) -> int:
    return replicates[0][1][label].train_seeds


def se_calibration(backbone, suite, steps: int, policies_dir: Path, *, seeds: int = 8, replicates: int = 8, schedules: list[str] = ("default",),
                   batch_size: int | None = None, log: Callable[[str], object] = lambda m: None) -> dict:
    """Repeat one backbone's comparison over `replicates` disjoint seed bases (0, n, 2n, ...) with `seeds`
    images per prompt; the per-difference calibration of `summarise_differences`."""
    if replicates < 2:
        raise JsbenchError(f"--replicates must be at least 2 to measure a spread, got {replicates}")
    reps = []
    for r in range(replicates):
        base = r * seeds
        reps.append((base, replicate_rows(backbone, suite, steps, policies_dir, seeds=seeds, seed_base=base, schedules=schedules,
                                          batch_size=batch_size, log=log)))
        log(f"  {backbone.name} · {steps} steps · replicate {r + 1}/{replicates} (seed base {base}) done")
    diffs = summarise_differences(reps, suite)
    # every difference at once: sqrt(sum spread^2 / sum mean SE^2); one difference's ratio from R replicates
    # is itself uncertain (the SD of R draws is off by about 1 / sqrt(2 (R - 1)), 27% at R = 8)
    pooled = math.sqrt(sum(d["spread"] ** 2 for d in diffs) / sum(d["mean_se"] ** 2 for d in diffs)) if diffs else math.nan
    return {"backbone": backbone.name, "model_id": backbone.model_id, "steps": steps, "suite": suite.name, "metric": suite.primary_metric,
            "seeds_per_prompt": seeds, "seed_bases": [b for b, _ in reps], "prompts": len(suite.items("test")),
            "rows": {label: run.train_seeds for label, run in reps[0][1].items()}, "differences": diffs,
            "pooled_ratio": pooled, "ratio_relative_error": 1 / math.sqrt(2 * (replicates - 1)), "all_ok": all(d["ok"] for d in diffs)}

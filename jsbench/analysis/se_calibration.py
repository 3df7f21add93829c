"""SE calibration: do the standard errors jsbench prints cover the spread they claim to measure?

A learned row's SE has two parts (jsbench.stats): the images' (prompt-clustered) and the training seeds'.
Each is tested against the spread it claims, with everything else held fixed:

* **Image noise** (`se_calibration`): a comparison (default, the zoo rows asked for, every learned row under
  `policies/`) is repeated over replicate seed bases: replicate r evaluates images r*n .. r*n + n-1 of every
  prompt, so replicates share no noise and the policies stay the same. For each paired difference of two
  rows (a − b, on the same images, as the leaderboard's Δ columns) the spread of Δ over replicates (sample
  SD) is divided by the mean *image part* of its SE (the prompt-clustered SE of the per-image difference of
  the seed means): the part that moves when only the images change. (Dividing by the whole two-level SE, as
  before, gives a ratio below 1 by construction when the seed term is large.)
* **Training seeds** (`seed_term_calibration`): two rows trained with many seeds (S = G * m), evaluated on
  one fixed set of images; the seeds are split into G disjoint groups of m, each group's Δ is the mean of
  its per-seed differences (seed s of a minus seed s of b, as the leaderboard pairs them), and the spread
  of Δ over groups (the images are the same in every group, so only the seeds move it) is divided by the
  RMS over groups of the seed part of the SE the leaderboard would print for a row of m seeds,
  sqrt(var_s / m). Calibrated, ratio² follows F(G − 1, G (m − 1)) (between-group over pooled within-group
  variance of the per-seed differences), which gives the ratio's 95 % interval; a χ² interval (the printed
  seed part taken as known) is given beside it.

A ratio near 1 is a calibrated SE; above 1 the printed SE is too small.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from jsbench import JsbenchError
from jsbench.report.compare import evaluate_learned_row, shipped_policies
from jsbench.evaluation.evaluate import evaluate, resolve_schedule
from jsbench.policy.schedule_policy import read_manifest
from jsbench.evaluation.results import overall_of, paired_metrics
from jsbench.stats import sample_variance

TARGET_RATIO = 1.3
SCHEMA = "jsbench.se_calibration/2"  # 2: ratio against the image part; seed_term


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


def image_part_se(suite, run_a, run_b) -> float:
    """The image part of the SE of Δ = a − b: the suite's prompt-clustered SE (its 'overall' of the primary
    metric) of the per-image difference of the two rows' seed means, the first term of the two-level SE."""
    diff = [{k: x[k] - y[k] for k in x if k in y} for x, y in zip(run_a.scores, run_b.scores)]
    return overall_of(suite, diff, [it for it, _ in run_a.rows()]).stderr


def _ratio(spread: float, se: float) -> float:
    return spread / se if se > 0 else (0.0 if spread == 0 else math.inf)


def chi2_ratio_interval(ratio: float, df: int, level: float = 0.95) -> tuple[float, float]:
    """The interval of a true SD ratio given an observed ratio of a sample SD with `df` degrees of freedom
    to a known SE: s² df / σ² ~ χ²(df)."""
    from scipy.stats import chi2

    a = (1 - level) / 2
    return ratio * math.sqrt(df / chi2.ppf(1 - a, df)), ratio * math.sqrt(df / chi2.ppf(a, df))


def summarise_differences(replicates: list[tuple[int, dict]], suite, pairs: list[tuple[str, str]] | None = None) -> list[dict]:
    """Per paired difference a − b (every pair of rows, or `pairs`): each replicate's Δ, its printed SE (the
    overall of the suite's primary metric, as the leaderboard's Δ columns) and that SE's image part; the SD
    of Δ over replicates, and its ratio to the mean image part (with a χ² interval over the replicates)."""
    metric = suite.primary_metric
    labels = list(replicates[0][1])
    pairs = pairs if pairs is not None else [(a, b) for i, b in enumerate(labels) for a in labels[i + 1 :]]
    out = []
    for a, b in pairs:
        reps = []
        for base, runs in replicates:
            d, se = paired_metrics(suite, runs[a], runs[b])[("overall", metric)][:2]
            reps.append({"seed_base": base, "delta": d, "se": se, "image_se": image_part_se(suite, runs[a], runs[b])})
        deltas = [r["delta"] for r in reps]
        m = sum(deltas) / len(deltas)
        spread = math.sqrt(sum((d - m) ** 2 for d in deltas) / (len(deltas) - 1)) if len(deltas) > 1 else math.nan
        mean_se = sum(r["se"] for r in reps) / len(reps)
        mean_image_se = sum(r["image_se"] for r in reps) / len(reps)
        ratio = _ratio(spread, mean_image_se)
        low, high = chi2_ratio_interval(ratio, len(deltas) - 1) if len(deltas) > 1 and math.isfinite(ratio) else (math.nan, math.nan)
        out.append({"a": a, "b": b, "mean_delta": m, "spread": spread, "mean_se": mean_se, "mean_image_se": mean_image_se, "ratio": ratio,
                    "ratio_ci": [low, high], "ok": bool(ratio <= TARGET_RATIO),
                    "train_seeds": [runs_train_seeds(replicates, a), runs_train_seeds(replicates, b)], "replicates": reps})
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
    # every difference at once: sqrt(sum spread^2 / sum mean image SE^2); one difference's ratio from R
    # replicates is itself uncertain (the SD of R draws is off by about 1 / sqrt(2 (R - 1)), 27% at R = 8)
    pooled = math.sqrt(sum(d["spread"] ** 2 for d in diffs) / sum(d["mean_image_se"] ** 2 for d in diffs)) if diffs else math.nan
    return {"backbone": backbone.name, "model_id": backbone.model_id, "steps": steps, "suite": suite.name, "metric": suite.primary_metric,
            "seeds_per_prompt": seeds, "seed_bases": [b for b, _ in reps], "prompts": len(suite.items("test")),
            "rows": {label: run.train_seeds for label, run in reps[0][1].items()}, "differences": diffs,
            "pooled_ratio": pooled, "ratio_relative_error": 1 / math.sqrt(2 * (replicates - 1)), "all_ok": all(d["ok"] for d in diffs)}


def overall_score(suite, run) -> float:
    """A run's headline: the suite's 'overall' of its primary metric."""
    return overall_of(suite, run.scores, [it for it, _ in run.rows()]).value


def seed_term_summary(per_seed_a: list[float], per_seed_b: list[float], group_size: int) -> dict:
    """The seed-term calibration from two rows' per-seed scores on the same images (seed s of a against seed
    s of b): the per-seed differences split into consecutive disjoint groups of `group_size`, each group's
    Δ and printed seed part sqrt(var_s / m); the spread of Δ over groups, its ratio to the RMS seed part,
    and the ratio's F and χ² 95 % intervals (module docstring)."""
    from scipy.stats import f as f_dist

    if len(per_seed_a) != len(per_seed_b):
        raise JsbenchError(f"rows of {len(per_seed_a)} and {len(per_seed_b)} seeds: the seed-term calibration pairs seed s with seed s")
    m = int(group_size)
    G = len(per_seed_a) // m
    if m < 2 or G < 2:
        raise JsbenchError(f"{len(per_seed_a)} seeds in groups of {m}: need groups of at least 2 seeds and at least 2 groups")
    d = [x - y for x, y in zip(per_seed_a, per_seed_b)][: G * m]
    groups = [d[g * m : (g + 1) * m] for g in range(G)]
    deltas = [math.fsum(g) / m for g in groups]
    within = [sample_variance(g) for g in groups]
    seed_se = [math.sqrt(v / m) for v in within]
    mean = math.fsum(deltas) / G
    spread = math.sqrt(math.fsum((x - mean) ** 2 for x in deltas) / (G - 1))
    rms = math.sqrt(math.fsum(v / m for v in within) / G)
    ratio = _ratio(spread, rms)
    df1, df2 = G - 1, G * (m - 1)
    if math.isfinite(ratio):
        f_ci = [ratio / math.sqrt(f_dist.ppf(0.975, df1, df2)), ratio / math.sqrt(f_dist.ppf(0.025, df1, df2))]
        chi_ci = list(chi2_ratio_interval(ratio, df1))
    else:
        f_ci = chi_ci = [math.nan, math.nan]
    return {"seeds": G * m, "group_size": m, "groups": G, "per_seed_delta": d, "group_delta": deltas, "group_seed_se": seed_se,
            "mean_delta": mean, "spread": spread, "rms_seed_se": rms, "ratio": ratio, "ratio_ci": f_ci, "ratio_ci_rule": f"F({df1}, {df2})",
            "ratio_ci_chi2": chi_ci, "covers_1": bool(f_ci[0] <= 1.0 <= f_ci[1])}


def seed_term_calibration(backbone, suite, steps: int, row_a: list[Path], row_b: list[Path], *, group_size: int = 3, seeds: int = 8,
                          seed_base: int = 0, batch_size: int | None = None, log: Callable[[str], object] = lambda m: None) -> dict:
    """Evaluate every training seed of rows a and b (folders `seed<S>/`, paired by position) on the suite's
    test prompts x `seeds` images from `seed_base` (the same images for every seed) and summarise the seed
    term (`seed_term_summary`)."""
    if len(row_a) != len(row_b):
        raise JsbenchError(f"{row_a[0].parent.name} has {len(row_a)} seeds and {row_b[0].parent.name} {len(row_b)}: train both alike")
    scores = {}
    for name, row in (("a", row_a), ("b", row_b)):
        values = []
        for folder in row:
            source = resolve_schedule(f"policy:{folder}", backbone, steps, suite=suite, log=log)
            values.append(overall_score(suite, evaluate(backbone, suite, source, seeds, seed_base=seed_base, batch_size=batch_size, progress=False)))
        scores[name] = values
        log(f"  {row[0].parent.name}: {len(values)} seeds evaluated")
    label = lambda row: read_manifest(row[0]).get("command", "")  # noqa: E731
    return {"backbone": backbone.name, "model_id": backbone.model_id, "steps": steps, "suite": suite.name, "metric": suite.primary_metric,
            "a": row_a[0].parent.name, "b": row_b[0].parent.name, "seeds_per_prompt": seeds, "seed_base": seed_base,
            "prompts": len(suite.items("test")), "a_per_seed": scores["a"], "b_per_seed": scores["b"],
            "train_command_a": label(row_a), **seed_term_summary(scores["a"], scores["b"], group_size)}

"""Sample efficiency of the baselines, paired over training seeds (the logic of scripts/bench_sample_efficiency.py).

Every baseline trains the same policy from the same initialisation on the same contexts and draws (a
run's contexts and noises come from (seed, update) only), so for one training seed two baselines differ
only through the baseline: runs are paired by seed. Per run:
- AUC: the mean training reward over all updates (the area under the reward curve per update), a
  measure of how fast and how far it rose;
- held-out: the final policy's deterministic schedule scored on the suite's test prompts.
Per (K, baseline b) the mean over seeds, and per b the paired difference b − rloo over the seeds where
neither run collapsed: mean, SE over seeds (sd / sqrt(S)), and the 95 % Student-t interval at S - 1 df
(jsbench.stats; a percentile bootstrap over a handful of seeds is far too narrow).
A run collapsed when its final reward (mean of the last `window` updates) fell below COLLAPSE_FRACTION
of its starting reward (the first `window`), or is not finite: it is flagged and left out, not scored.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

from jsbench.io import write_text_atomic
from jsbench.stats import naive_mean

COLLAPSE_FRACTION = 0.5


def train_and_score(cfg, eval_seeds: int, cache: Path, fresh: bool = False) -> dict:
    """Train one run for `cfg.iters` updates (cached under `cache`, keyed by its settings) and score its final
    policy on the held-out prompts with `eval_seeds` images each (0: no held-out score)."""
    from dataclasses import asdict

    key = hashlib.sha256(json.dumps(asdict(cfg), sort_keys=True).encode() + f"|{eval_seeds}|noise-per-image".encode()).hexdigest()[:16]
    path = Path(cache) / f"{cfg.baseline}-K{cfg.samples}-s{cfg.seed}-{key}.json"
    if path.exists() and not fresh:
        return json.loads(path.read_text())
    from jsbench.distributed import DistContext
    from jsbench.evaluation.evaluate import evaluate, policy_source
    from jsbench.evaluation.results import run_metrics
    from jsbench.suites import load_suite
    from jsbench.train.reinforce import Trainer

    trainer = Trainer(cfg, Path(cache) / "scratch", dist=DistContext())
    rewards, seconds = [], []
    for it in range(cfg.iters):
        t = time.perf_counter()
        rewards.append(trainer.step(it)["reward"])
        seconds.append(time.perf_counter() - t)
    held_out = None
    if eval_seeds > 0:
        suite = load_suite(cfg.suite, trainer.backbone)
        run = evaluate(trainer.backbone, suite, policy_source(trainer.policy, label=cfg.baseline, backbone=trainer.backbone), eval_seeds, progress=False)
        m = run_metrics(suite, run)[("overall", suite.primary_metric)]
        held_out = {"value": m.value, "stderr": m.stderr, "images": len(run.scores)}
    out = {"config": asdict(cfg), "rewards": rewards, "seconds_per_update": sum(seconds) / len(seconds), "held_out": held_out}
    write_text_atomic(path, json.dumps(out))
    return out


def reward_auc(rewards: list[float]) -> float:
    """The mean training reward over the updates: the area under the curve per update."""
    return sum(rewards) / len(rewards) if rewards else math.nan


def collapsed(rewards: list[float], window: int) -> bool:
    """Whether a run collapsed: a non-finite reward, or a final reward (last `window` updates) below
    COLLAPSE_FRACTION of its starting reward (first `window`)."""
    if not rewards or any(not math.isfinite(r) for r in rewards):
        return True
    w = max(1, min(window, len(rewards)))
    start, final = sum(rewards[:w]) / w, sum(rewards[-w:]) / w
    return final < COLLAPSE_FRACTION * start


def paired_difference(values_b: dict[int, float], values_ref: dict[int, float]) -> dict:
    """b − ref paired by training seed (the seeds both have): mean, SE over seeds with its S - 1 df, the 95 %
    t interval, the two-sided p, and what it says ('above', 'below', or 'not resolved' when the interval
    holds 0)."""
    seeds = sorted(set(values_b) & set(values_ref))
    diffs = [values_b[s] - values_ref[s] for s in seeds]
    est = naive_mean(diffs)  # each seed an independent draw
    ci = est.interval() if len(diffs) > 1 else (math.nan, math.nan)
    verdict = "above" if ci[0] > 0 else "below" if ci[1] < 0 else "not resolved"
    return {"seeds": seeds, "per_seed": diffs, "mean": est.value, "se": est.stderr, "df": len(diffs) - 1, "ci95": list(ci), "p": est.p,
            "verdict": verdict}


def summarise(runs: dict[tuple[int, str], list[dict]], K: int, window: int, baselines: list[str], reference: str = "rloo") -> dict:
    """One K: per baseline the seed-mean reward curve, AUC and held-out score over its runs that did not
    collapse, the collapsed seeds, and the paired AUC and held-out differences to `reference`."""
    per = {}
    for b in baselines:
        rs = runs[(K, b)]
        ok = [r for r in rs if not collapsed(r["rewards"], window)]
        curve = [sum(v) / len(v) for v in zip(*(r["rewards"] for r in ok))] if ok else []
        auc = {r["config"]["seed"]: reward_auc(r["rewards"]) for r in ok}
        held = {r["config"]["seed"]: r["held_out"]["value"] for r in ok if r.get("held_out")}
        a, h = naive_mean(list(auc.values())), naive_mean(list(held.values()))
        per[b] = {"collapsed_seeds": [r["config"]["seed"] for r in rs if r not in ok], "seeds": sorted(auc), "curve": curve,
                  "per_seed_curves": [r["rewards"] for r in ok], "auc": {"mean": a.value, "se": a.stderr, "per_seed": auc},
                  "held_out": {"mean": h.value, "se": h.stderr, "per_seed": held} if held else None}
    paired = {}
    for b in baselines:
        if b == reference:
            continue
        paired[b] = {"auc": paired_difference(per[b]["auc"]["per_seed"], per[reference]["auc"]["per_seed"])}
        if per[b]["held_out"] and per[reference]["held_out"]:
            paired[b]["held_out"] = paired_difference(per[b]["held_out"]["per_seed"], per[reference]["held_out"]["per_seed"])
    first = runs[(K, baselines[0])][0]["config"]
    return {"K": K, "B": first["contexts"], "steps": first["steps"], "updates": first["iters"], "window": window, "reference": reference,
            "baselines": per, "paired_vs_reference": paired}

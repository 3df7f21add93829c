"""Convergence from the held-out curve: has a run's held-out score stopped moving?

A training run records its held-out curve in `heldout.jsonl` (jsbench.train.reinforce: the policy's mean schedule on
a fixed set of held-out images, the same images at every point and for every seed, at update 0 and every
`heldout_every` updates). Torch-free: `jsbench policies`, the leaderboards and `python -m jsbench.policy.convergence`
read it without loading a model.

One run (`curve_convergence`)
    Take the points of the last half of training, iterations k >= T/2 (T: the last point's iteration;
    11 of the default 21 points), x_k = 4 k / T in quarters of training. The rise is the least-squares
    slope of the score on x over those m points, b = sum a_k y_k with a_k = (x_k - mean x) / Sxx: how much
    the score still gains per quarter of training (for a straight line, last quarter's mean minus the
    quarter before's). Its noise is not independent from point to point: the policy wanders under SGD
    (consecutive points share most of their parameters) and the held-out images are the same at every
    point. So the residuals e = M y of the line (M = I - X (X'X)^-1 X', X = [1, x]) are modelled as a
    stationary AR(1), Cov(e_j, e_k) = g0 phi^|j-k| (R(phi)), and phi is read from their lag-1
    autocorrelation r = sum e_k e_k+1 / sum e_k^2 by the method of moments on the residuals (which a
    plain lag-1 correlation underestimates: the fitted line absorbs part of the wander):
        E[r] ~ tr(M R M J) / tr(M R) =: g(phi)    (J: the lag-1 shift),   phi = g^-1(r) clipped to [0, PHI_MAX]
        g0 = sum e_k^2 / tr(M R(phi)),            SE(b)^2 = g0 a' R(phi) a.
    Each direction is tested one-sided at LEVEL, "is it still rising (falling) by more than the margin?":
        still rising   <=>  (b - MARGIN) / SE(b) > t_{1 - LEVEL, m - 2}
        still falling  <=>  (-b - MARGIN) / SE(b) > t_{1 - LEVEL, m - 2}
    and a run is converged when it is neither (`direction` says which it is): a score that falls at the end
    of training has not settled either, and a policy read off it is not the one the run was heading for.
    A curve with fewer than MIN_POINTS points in its last half, or none at all, is not judged (`converged`
    None).

One learned row (`row_convergence`, the seeds' curves)
    The row's verdict is that of its seeds' curves averaged point by point. Its rise is the average of the
    seeds' rises (the slope is linear in the curve), b = mean_s b_s, and with S >= MIN_SEEDS_SPREAD seeds its
    SE is their spread, SE = sd(b_s) / sqrt(S), against t with S - 1 df: the seeds are independent runs
    (own initialisation, contexts and noise), so the spread of their rises carries each run's wander and
    autocorrelation whole, with no model of it; the AR(1) estimate above is only needed where there is one
    curve. With fewer seeds (S - 1 < 2 df: t_0.95,1 = 6.3 leaves no power) the averaged curve is judged as
    one run. A row with a seed folder without heldout.jsonl (a run trained before held-out curves), or
    whose seeds' curves are at different iterations, is not judged.

Simulated (`simulate_curve`, scripts/bench_convergence.py, bench/results/convergence.json, 1000 trials a
setting): 21-point curves of 64 held-out binary images with AR(1) wander (SD 0.01-0.03, phi 0-0.6) are
flagged when flat at most 6.7 % of the time (the two one-sided tests together); curves still rising by
>= 0.10 a quarter are flagged >= 90 % of the time up to wander SD 0.02 (>= 0.15 at SD 0.03, phi >= 0.3),
curves falling by 0.10 a quarter 81-97 %; rows of 8 seeds: flat ones <= 0.4 %, rows rising or falling by
>= 0.05 a quarter >= 98 % (rising by 0.03: 62-98 %).

Re-stamping: `python -m jsbench.policy.convergence restamp FOLDER...` rewrites the `convergence` field of every
manifest.json under the folders from its run's heldout.jsonl, leaving every other key as it was (the
policy's checksum is that of policy.safetensors, which is not touched).
`python -m jsbench.policy.convergence row ROW...` prints a row's verdict (its seeds' averaged curve's, as the
leaderboards read it; `--curve` adds that curve) and writes nothing.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path
from typing import Sequence

from jsbench.io import training_runs
from jsbench.stats import t_quantile

HELDOUT_FILE = "heldout.jsonl"
MARGIN = 0.01  # a rise of the held-out score of at most this much per quarter of training counts as stopped
LEVEL = 0.05  # level of each one-sided test, "still rising (falling) by more than MARGIN"
MIN_POINTS = 4  # points in the last half below which a curve is not judged
PHI_MAX = 0.95  # the largest AR(1) coefficient the SE allows for (a curve wandering more is judged as this)
MIN_SEEDS_SPREAD = 3  # a row's SE is its seeds' spread from this many seeds (2 df) on

RULE = (f"held-out score: least-squares slope over the last half of training, per quarter of training, with an "
        f"AR(1) SE of the points' dependence; not converged when (|rise| - {MARGIN}) / SE > t({1 - LEVEL:g}, m - 2)")
ROW_RULE = (f"held-out score averaged over the training seeds: mean of the seeds' rises (slope over the last half, "
            f"per quarter of training) with SE sd / sqrt(S); not converged when (|rise| - {MARGIN}) / SE > t({1 - LEVEL:g}, S - 1)")
NO_CURVE = f"not judged: no {HELDOUT_FILE} (a run trained before held-out curves)"


VERDICT_WORDS = {True: "converged", False: "NOT converged", None: "not judged"}  # a verdict's `converged`, printed


class ConvergenceError(ValueError):
    pass


# ---------------------------------------------------------------------------------------------- reading


def read_heldout(path: str | Path) -> list[dict]:
    """The held-out points of a run, in order of iteration; a line cut short by a kill ends the curve."""
    out = []
    for ln in Path(path).read_text().splitlines():
        if not ln.strip():
            continue
        try:
            rec = json.loads(ln)
            out.append({"iteration": int(rec["iteration"]), "score": float(rec["score"])})
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            break
    return sorted(out, key=lambda r: r["iteration"])


def curve_of(folder: str | Path) -> list[tuple[int, float]] | None:
    """A run folder's held-out curve as (iteration, score) pairs; None when it has no heldout.jsonl."""
    path = Path(folder) / HELDOUT_FILE
    if not path.is_file():
        return None
    return [(r["iteration"], r["score"]) for r in read_heldout(path)]


def last_half(curve: Sequence[tuple[int, float]]) -> tuple[tuple[int, ...], list[float]]:
    """The points at iterations >= T/2 (T the last point's), finite scores only."""
    pts = [(int(k), float(s)) for k, s in curve if math.isfinite(s)]
    if not pts:
        return (), []
    end = max(k for k, _ in pts)
    kept = [(k, s) for k, s in pts if 2 * k >= end]
    return tuple(k for k, _ in kept), [s for _, s in kept]


# ---------------------------------------------------------------------------------------------- the rule


def _ar1(phi: float, m: int) -> list[list[float]]:
    return [[phi ** abs(i - j) for j in range(m)] for i in range(m)]


def _matmul(a, b):
    cols = list(zip(*b))
    return [[math.fsum(x * y for x, y in zip(row, col)) for col in cols] for row in a]


def _quad(v, r) -> float:
    return math.fsum(v[i] * r[i][j] * v[j] for i in range(len(v)) for j in range(len(v)))


_GRID = [i / 100 for i in range(int(round(PHI_MAX * 100)) + 1)]


@functools.lru_cache(maxsize=64)
def _design(iterations: tuple[int, ...]):
    """For points at these iterations: the slope's weights a (per quarter of training), the residual maker M,
    and over a grid of phi: g(phi) = tr(M R M J) / tr(M R), tr(M R) and a' R a. Pure Python sums (math.fsum):
    the same numbers on every machine, so a manifest's verdict repeats exactly."""
    m, end = len(iterations), iterations[-1]
    x = [4 * k / end for k in iterations]
    xm = math.fsum(x) / m
    sxx = math.fsum((v - xm) ** 2 for v in x)
    a = [(v - xm) / sxx for v in x]
    # M = I - 1 1'/m - (x - xm)(x - xm)'/Sxx
    M = [[(1.0 if i == j else 0.0) - 1 / m - (x[i] - xm) * (x[j] - xm) / sxx for j in range(m)] for i in range(m)]
    g, tr, va = [], [], []
    for phi in _GRID:
        R = _ar1(phi, m)
        MRM = _matmul(_matmul(M, R), M)
        t = math.fsum(M[i][j] * R[j][i] for i in range(m) for j in range(m))  # tr(M R)
        g.append(math.fsum(MRM[i + 1][i] for i in range(m - 1)) / t)  # tr(M R M J): the first superdiagonal's sum
        tr.append(t)
        va.append(_quad(a, R))
    return a, M, g, tr, va


def _interp(r: float, g: list[float]) -> float:
    """phi with g(phi) = r on the grid (g rises with phi), clipped to [0, PHI_MAX]."""
    if r <= g[0]:
        return 0.0
    for i in range(1, len(g)):
        if r <= g[i]:
            return _GRID[i - 1] + (_GRID[i] - _GRID[i - 1]) * (r - g[i - 1]) / (g[i] - g[i - 1])
    return PHI_MAX


def _at(phi: float, values: list[float]) -> float:
    i = min(int(phi * 100), len(_GRID) - 2)
    w = (phi - _GRID[i]) / (_GRID[i + 1] - _GRID[i])
    return values[i] + w * (values[i + 1] - values[i])


def _rise_and_residuals(iterations: tuple[int, ...], scores: list[float]):
    a, M, g, tr, va = _design(iterations)
    rise = math.fsum(w * y for w, y in zip(a, scores))
    e = [math.fsum(M[i][j] * scores[j] for j in range(len(scores))) for i in range(len(scores))]
    return rise, e, (g, tr, va)


def _round(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.10g}")


def curve_convergence(curve: Sequence[tuple[int, float]] | None) -> dict:
    """One run's verdict from its held-out curve [(iteration, score), ...] (see the module docstring).
    `converged` is None when it cannot be judged: no curve, or fewer than MIN_POINTS points in its last half."""
    if curve is None:
        return {"converged": None, "rule": RULE, "reason": NO_CURVE}
    iterations, scores = last_half(curve)
    if len(iterations) < MIN_POINTS or iterations[-1] <= 0:
        return {"converged": None, "rule": RULE, "reason": f"not judged: {len(iterations)} held-out points in the last half (needs {MIN_POINTS})",
                "iterations": list(iterations)}
    rise, e, (g, tr, va) = _rise_and_residuals(iterations, scores)
    ss = math.fsum(v * v for v in e)
    r = math.fsum(e[i] * e[i + 1] for i in range(len(e) - 1)) / ss if ss > 0 else 0.0
    phi = _interp(r, g)
    se = math.sqrt(max(ss / _at(phi, tr) * _at(phi, va), 0.0))
    df = len(iterations) - 2
    return _verdict(rise, se, df, RULE, iterations=list(iterations), phi=round(phi, 4))


def _verdict(rise: float, se: float, df: int, rule: str, **extra) -> dict:
    crit = t_quantile(1 - LEVEL, df)
    rising, falling = (rise - MARGIN) > crit * se, (-rise - MARGIN) > crit * se
    return {"converged": not (rising or falling), "direction": "rising" if rising else "falling" if falling else "flat",
            "rise": _round(rise), "se": _round(se), "df": df, "t_crit": _round(crit), "margin": MARGIN, "level": LEVEL,
            "fell": bool(falling), "rule": rule, **extra}


def mean_curve(curves: Sequence[Sequence[tuple[int, float]]]) -> list[tuple[int, float]]:
    """The seeds' curves averaged point by point (curves at the same iterations)."""
    return [(k, math.fsum(c[i][1] for c in curves) / len(curves)) for i, (k, _) in enumerate(curves[0])]


def row_convergence(curves: Sequence[Sequence[tuple[int, float]] | None]) -> dict:
    """A learned row's verdict from its training seeds' held-out curves (None for a seed without one): see
    the module docstring. `converged` None when any seed has no curve, or the seeds' curves differ in
    their iterations."""
    if not curves:
        return {"converged": None, "rule": ROW_RULE, "reason": "not judged: no training seeds"}
    missing = sum(c is None for c in curves)
    if missing:
        return {"converged": None, "rule": ROW_RULE, "seeds": len(curves),
                "reason": f"not judged: {missing} of {len(curves)} training seeds have no {HELDOUT_FILE} (trained before held-out curves)"}
    its = [tuple(k for k, _ in c) for c in curves]
    if len(set(its)) > 1:
        return {"converged": None, "rule": ROW_RULE, "seeds": len(curves), "reason": "not judged: the seeds' held-out curves are at different iterations"}
    averaged = mean_curve(curves)
    if len(curves) < MIN_SEEDS_SPREAD:
        out = curve_convergence(averaged)
        return {**out, "seeds": len(curves), "se_from": "autocorrelation of the averaged curve (too few seeds for their spread)"}
    per_seed = [curve_convergence(c) for c in curves]
    if any(v["converged"] is None for v in per_seed):
        return {"converged": None, "rule": ROW_RULE, "seeds": len(curves), "reason": per_seed[0].get("reason", "not judged")}
    rises = [v["rise"] for v in per_seed]
    iterations, scores = last_half(averaged)
    rise = _rise_and_residuals(iterations, scores)[0]  # = the mean of the seeds' rises
    s = len(rises)
    mean = math.fsum(rises) / s
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in rises) / (s - 1))
    return _verdict(rise, sd / math.sqrt(s), s - 1, ROW_RULE, iterations=list(iterations), seeds=s,
                    se_from="spread of the seeds' rises", seed_rises=rises)


def run_convergence(folder: str | Path) -> dict:
    """A run folder's verdict from its heldout.jsonl (not judged without one)."""
    return curve_convergence(curve_of(folder))


def row_verdict(path: str | Path) -> dict:
    """The verdict of the learned row at `path` (a row folder of seed<S>/ runs, or one run's folder)."""
    return row_convergence([curve_of(f) for f in training_runs(path)])


# ---------------------------------------------------------------------------------------------- simulation


def simulate_curve(rng, *, points: int = 21, images: int = 64, wander_sd: float = 0.02, phi: float = 0.6, rise: float = 0.0,
                   level: float = 0.7, jitter: float = 0.05) -> list[tuple[int, float]]:
    """A held-out curve as training makes one (for the simulations that show the rule's error rates):
    `images` binary held-out images, the same at every point (each succeeds when its fixed uniform draw is
    below its success probability), whose probabilities are the policy's quality plus the image's own offset
    (SD 0.25) and a per-point jitter (SD `jitter`: a schedule change helps some images and hurts others).
    The quality approaches `level` fast at the start, rises steadily by `rise` per quarter of training
    (ending at `level`), and wanders about that trend as a stationary AR(1) (SD `wander_sd`, coefficient `phi`). `rng`: a numpy Generator. Points at iterations 0, 20, ... (20 updates a point)."""
    import numpy as np

    n = points
    w = np.empty(n)
    w[0] = rng.normal(0, wander_sd)
    for k in range(1, n):
        w[k] = phi * w[k - 1] + rng.normal(0, wander_sd * math.sqrt(1 - phi * phi))
    k = np.arange(n)
    quarter = (n - 1) / 4
    trend = level - 0.4 * np.exp(-k / 2.0) + rise / ((n - 1) / 4) * (k - (n - 1))  # still rising by `rise` a quarter
    p = np.clip(trend[:, None] + w[:, None] + rng.normal(0, 0.25, images)[None, :] + rng.normal(0, jitter, (n, images)), 0, 1)
    u = rng.random(images)
    scores = (u[None, :] < p).mean(1)
    return [(int(i * 20), float(s)) for i, s in zip(k, scores)]


def flag_rates(seed: int = 0, trials: int = 400, wander_sds=(0.01, 0.02, 0.03), phis=(0.0, 0.3, 0.6), rises=(0.0, 0.05, 0.1, 0.15, -0.1),
               row_seeds: int = 8, row_rises=(0.0, 0.03, 0.05, -0.05)) -> dict:
    """How often the rule flags simulated curves as not converged: per run (`runs`), for every wander SD,
    phi and rise per quarter (0: flat; negative: still falling), and per row of `row_seeds` seeds (`rows`).
    Seeded."""
    import numpy as np

    rng = np.random.default_rng(seed)
    runs, rows = [], []
    for sd in wander_sds:
        for phi in phis:
            for r in rises:
                flagged = sum(curve_convergence(simulate_curve(rng, wander_sd=sd, phi=phi, rise=r))["converged"] is False for _ in range(trials))
                runs.append({"wander_sd": sd, "phi": phi, "rise": r, "trials": trials, "flagged": flagged / trials})
            for r in row_rises:
                t = max(trials // 4, 1)
                flagged = sum(row_convergence([simulate_curve(rng, wander_sd=sd, phi=phi, rise=r) for _ in range(row_seeds)])["converged"] is False
                              for _ in range(t))
                rows.append({"wander_sd": sd, "phi": phi, "rise": r, "seeds": row_seeds, "trials": t, "flagged": flagged / t})
    return {"margin": MARGIN, "level": LEVEL, "points": 21, "images": 64, "seed": seed, "runs": runs, "rows": rows}


# ---------------------------------------------------------------------------------------------- re-stamping


def restamp(manifest_path: str | Path, write: bool = True) -> tuple[dict | None, dict]:
    """Set a run's manifest `convergence` to the verdict of its heldout.jsonl (not judged without one);
    every other key is kept, and the file is written as `Policy.save` writes it (indented, key-sorted JSON:
    refuses a manifest not in that form, which rewriting would reformat). Returns (old, new) verdicts;
    nothing is written when they are equal or `write` is False."""
    from jsbench.io import write_json_atomic

    path = Path(manifest_path)
    text = path.read_text()
    manifest = json.loads(text)
    if json.dumps(manifest, indent=2, sort_keys=True) + "\n" != text:
        raise ConvergenceError(f"{path} is not written as jsbench writes manifests (indented, key-sorted): not rewritten")
    old, new = manifest.get("convergence"), run_convergence(path.parent)
    if write and old != new:
        write_json_atomic(path, {**manifest, "convergence": new})
    return old, new


def _print_rows(rows: Sequence[Path], *, curve: bool) -> int:
    """`row`: each row's verdict, as the leaderboards read it; 2 when a folder holds no training run."""
    runs = {row: training_runs(row) for row in rows}
    empty = [str(r) for r, found in runs.items() if not found]
    if empty:
        print(f"error: no training run (seed<S>/manifest.json) under {', '.join(empty)}", file=sys.stderr)
        return 2
    for row in rows:
        curves = [curve_of(f) for f in runs[row]]
        v = row_convergence(curves)
        verdict = VERDICT_WORDS[v["converged"]]
        if v["converged"] is None:
            print(f"{row}: {verdict} ({v.get('reason', '')})")
            continue
        print(f"{row}: {verdict} ({v['direction']}), {v['seeds']} seeds, held-out rise {v['rise']:+.4f} a quarter, "
              f"se {v['se']:.4f}, df {v['df']}, over iterations {v['iterations'][0]}-{v['iterations'][-1]}")
        if curve:
            for k, score in mean_curve(curves):
                print(f"  {k}\t{score:.4f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m jsbench.policy.convergence", description="Held-out convergence verdicts of training runs.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("restamp", help="rewrite each manifest's `convergence` from its run's heldout.jsonl")
    p.add_argument("folders", nargs="+", type=Path, help="run folders or folders above them (e.g. policies/)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a manifest would change")
    r = sub.add_parser("row", help="a learned row's verdict from its seeds' averaged held-out curve (writes nothing)")
    r.add_argument("rows", nargs="+", type=Path, help="row folders of seed<S>/ runs (e.g. policies/analytic/global-n3)")
    r.add_argument("--curve", action="store_true", help="also print the seed-averaged curve, one point a line")
    args = parser.parse_args(argv)
    if args.command == "row":
        return _print_rows(args.rows, curve=args.curve)
    changed = 0
    for folder in args.folders:
        manifests = [folder / "manifest.json"] if (folder / "manifest.json").is_file() else sorted(folder.rglob("manifest.json"))
        for m in manifests:
            old, new = restamp(m, write=not args.check)
            verdict = VERDICT_WORDS[new["converged"]]
            same = old == new
            changed += not same
            rise = "" if new.get("rise") is None else f" rise {new['rise']:+.4f} se {new['se']:.4f}"
            print(f"{m.parent}: {verdict}{rise}{'' if same else ' (would change)' if args.check else ' (restamped)'}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())

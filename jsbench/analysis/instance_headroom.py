"""Instance headroom by the teacher-matching criterion, and the share of it a learned policy recovers.

From a leaderboard's committed per-image scores (`leaderboards/<suite>.scores.jsonl`), for one backbone
and step budget:

    headroom  = oss-image - oss          per-image OSS (each image's own DP) minus the authors' recipe
                                         (one median schedule): what per-instance schedules add to OSS
    gain      = instance - global        the learned instance policy (js by default) minus the learned
                                         global schedule (or `--global searched`)
    share     = gain / headroom

All three are the suite's overall number (the mean of task means) of paired per-image differences: the
rows are scored on the same prompts and noises. Error bars: a seeded bootstrap that resamples prompts
within each task (an image's noises stay with their prompt), so the SE counts the prompt clustering;
the share's interval is the bootstrap percentile interval of the ratio. Where the headroom's interval
reaches 0 or below, the share is None: there is no headroom to recover.

A learned row's per-image scores are means over its training seeds, so a prompt bootstrap cannot see the
spread between training runs. `gain_se` (the leaderboard's seed-inclusive SE of instance − global, its
`delta_global_stderr`, read by `leaderboard_gain`) makes up the difference: where it exceeds the
bootstrap SE of the gain, every draw of the gain gets independent normal noise of the missing variance, so
the gain's SE is the leaderboard's and the share's interval counts training seeds too. That SE has few
degrees of freedom (`gain_df`, the leaderboard's `delta_global_df`: Satterthwaite over the prompt and seed
terms, near S - 1 when the seeds dominate), so each draw's deviation from the gain is then divided by
sqrt(chi2_df / df), one chi-square draw per bootstrap draw: the gain's draws are t_df times its SE, as the
leaderboard's t interval is, and the share's interval widens with them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from jsbench import JsbenchError

__all__ = ["HeadroomError", "instance_headroom", "headroom_sections", "leaderboard_gain", "leaderboard_gain_se"]


class HeadroomError(JsbenchError):
    """Rows missing from the scores file, or rows scored on different prompts or seeds."""


def _entries(path: Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise HeadroomError(f"{path}: no such scores file (leaderboards/<suite>.scores.jsonl)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def headroom_sections(path: Path) -> list[tuple[str, int]]:
    """The (backbone, steps) sections of a scores file that have both an oss and an oss-image row."""
    seen: dict[tuple[str, int], set] = {}
    for e in _entries(path):
        seen.setdefault((e["backbone"], int(e["steps"])), set()).add(e["method"])
    return [k for k, methods in seen.items() if {"oss", "oss-image"} <= methods]


def leaderboard_gain(csv_path: Path, backbone: str, steps: int, instance: str = "js",
                     global_row: str = "global", model_id: str | None = None) -> tuple[float, float | None] | None:
    """The leaderboard's seed-inclusive SE of `instance` − global at (backbone, steps), overall, and its df
    (None when the CSV predates the df columns); None when the CSV has no such finite SE (no file, no row,
    or a global row other than the learned `global`). Refuses a file that is not a leaderboard CSV (read
    and validated by `leaderboard.read_committed`)."""
    import math

    from jsbench.report.leaderboard import read_committed

    if global_row != "global":
        return None
    try:
        rows = read_committed(csv_path)
    except JsbenchError as exc:
        raise HeadroomError(f"not a leaderboard CSV: {exc}") from None
    found = [r for r in rows
             if (r["backbone"], r["method"], r["task"]) == (backbone, instance, "overall") and r["steps"] == str(steps)
             and model_id in (None, r["model_id"])]
    if not found or not found[-1].get("delta_global_stderr"):  # the last, as for the scores file's entries
        return None
    se = float(found[-1]["delta_global_stderr"])
    df = float(found[-1]["delta_global_df"]) if found[-1].get("delta_global_df") else None
    return (se, df if df is not None and df > 0 else None) if math.isfinite(se) else None


def leaderboard_gain_se(csv_path: Path, backbone: str, steps: int, instance: str = "js",
                        global_row: str = "global", model_id: str | None = None) -> float | None:
    """The SE of `leaderboard_gain` alone."""
    found = leaderboard_gain(csv_path, backbone, steps, instance, global_row, model_id)
    return None if found is None else found[0]


def _overall(diff: np.ndarray, task_index: np.ndarray, tasks: int) -> float:
    """Mean over tasks of the task mean of per-prompt means [P] (every prompt has the same image count)."""
    sums = np.bincount(task_index, weights=diff, minlength=tasks)
    counts = np.bincount(task_index, minlength=tasks)
    return float(np.mean(sums[counts > 0] / counts[counts > 0]))


def instance_headroom(path: Path, backbone: str, steps: int, instance: str = "js", global_row: str = "global",
                      bootstrap: int = 2000, seed: int = 0, gain_se: float | None = None, gain_df: float | None = None) -> dict:
    """headroom, gain and share (see the module docstring) with bootstrap SEs and 95% intervals; `gain_se`:
    the gain's seed-inclusive SE, a floor on the bootstrap's, and `gain_df` its degrees of freedom (None:
    the normal), which make the gain's draws t-distributed where the floor applies (module docstring)."""
    want = {"oss": None, "oss-image": None, instance: None, global_row: None}
    for e in _entries(path):
        if e["backbone"] == backbone and int(e["steps"]) == steps and e["method"] in want:
            want[e["method"]] = e
    missing = [m for m, e in want.items() if e is None]
    if missing:
        raise HeadroomError(f"{path}: no {', '.join(missing)} row for {backbone} at {steps} steps")
    ref = want["oss"]
    for m, e in want.items():
        if e["prompts"] != ref["prompts"] or e["seeds"] != ref["seeds"]:
            raise HeadroomError(f"{path}: the {m} row of {backbone} at {steps} steps is scored on other prompts or seeds than oss")
    P, S = len(ref["prompts"]), len(ref["seeds"])
    per_prompt = {m: np.asarray(e["scores"], dtype=np.float64).reshape(P, S).mean(1) for m, e in want.items()}
    names = list(dict.fromkeys(ref["tasks"]))
    task_index = np.asarray([names.index(t) for t in ref["tasks"]])
    head = per_prompt["oss-image"] - per_prompt["oss"]
    gain = per_prompt[instance] - per_prompt[global_row]
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(task_index == t) for t in range(len(names))]
    boot_head, boot_gain = np.empty(bootstrap), np.empty(bootstrap)
    for b in range(bootstrap):
        idx = np.concatenate([rng.choice(m, size=m.size, replace=True) for m in members])
        boot_head[b] = _overall(head[idx], task_index[idx], len(names))
        boot_gain[b] = _overall(gain[idx], task_index[idx], len(names))
    h, g = _overall(head, task_index, len(names)), _overall(gain, task_index, len(names))
    missing_var = (gain_se or 0.0) ** 2 - float(np.var(boot_gain, ddof=1))
    floored = missing_var > 0
    if floored:  # the spread between training seeds, which the prompt bootstrap cannot see
        boot_gain = boot_gain + rng.normal(0.0, np.sqrt(missing_var), size=bootstrap)
        if gain_df is not None and np.isfinite(gain_df):
            # normal / sqrt(chi2_df / df) is t_df: the draws' spread is the leaderboard's t, not the normal
            boot_gain = g + (boot_gain - g) / np.sqrt(rng.chisquare(gain_df, size=bootstrap) / gain_df)

    def summary(point, draws, se=None):
        lo, hi = np.percentile(draws, [2.5, 97.5])
        return {"value": point, "se": float(np.std(draws, ddof=1)) if se is None else se, "ci95": [float(lo), float(hi)]}

    headroom = summary(h, boot_head)
    share = None  # a share of a headroom that may be 0 or negative is not a number worth printing
    if headroom["ci95"][0] > 0:
        lo, hi = np.percentile(boot_gain / boot_head, [2.5, 97.5])  # every draw's headroom is > 0 here
        share = {"value": g / h, "ci95": [float(lo), float(hi)]}
    return {"backbone": backbone, "steps": steps, "instance": instance, "global": global_row, "prompts": P, "seeds": S,
            "bootstrap": bootstrap, "seed": seed, "gain_se_floor": gain_se, "gain_df": gain_df if floored else None, "headroom": headroom,
            # floored: the SE is the leaderboard's (a t draw's SD is unstable, and infinite at df <= 2)
            "gain": summary(g, boot_gain, se=float(gain_se) if floored else None), "share": share}

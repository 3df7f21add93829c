"""Headline contrasts: the differences a leaderboard section exists to answer, each with its interval and power.

Per section (backbone, model, steps), for each pair of learned rows present (the method asks: does the
instance policy beat the learned global one; does the James–Stein baseline beat RLOO, the cross-context one,
its plug-in and JSPO variants; does reading the noise add to reading the prompt), and for each instance-level
method against the per-image teacher match (`oss-image`, a fixed row: its Δ has the learned row's seed term
alone, seed s of the method against the same teacher-match images):

    Δ = a − b, paired on the same images and by training seed (seed s of a against seed s of b), with its
    two-level SE, Satterthwaite df, 95 % Student-t interval and p (jsbench.stats), and the training seeds
    that would resolve a difference of RESOLVE_DIFFERENCE at that spread (jsbench.report.power): from the SE's
    image part and the variance of the per-seed differences. `stderr_unpaired_seeds` is the SE the same Δ
    would have if its seeds were not paired (each row's seed variance added): the gain of common random
    numbers, since seed s of every row draws the same contexts and training noise.

A section's contrasts are written by the compare run that evaluates it (`<suite>.contrasts.csv`, beside the
leaderboard CSV) and kept for the sections it does not; the page shows them under each section's table.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from jsbench.io import write_text_atomic
from jsbench.report.power import RESOLVE_DIFFERENCE, RESOLVE_POWER, seeds_to_resolve
from jsbench.evaluation.results import metric_estimate, overall_of
from jsbench.stats import LEVEL, paired_two_level_estimate, sample_variance

__all__ = ["HEADLINE_CONTRASTS", "REFERENCE_ROWS", "CSV_FIELDS", "section_contrasts", "contrasts_path", "read_contrasts", "write_contrasts", "contrast_lines"]

# (a, b, what a − b asks): reported where a is a learned row of the section and b is one too, or a REFERENCE_ROWS row
HEADLINE_CONTRASTS = (
    ("js", "global", "instance − global"),
    ("js", "rloo", "js − rloo"),
    ("js", "xctx", "js − xctx"),
    ("js", "js-plugin", "js − js-plugin"),
    ("js", "jspo", "js − jspo"),
    ("js", "js (prompt-only)", "noise + prompt − prompt only"),
    # the peer methods (docs/peer-methods.md): one-shot against step-by-step and against teacher-distilled
    ("tpdm (js)", "global", "step-by-step − global"),
    ("indis", "global", "distilled − global"),
    ("js", "tpdm (js)", "one-shot − step-by-step"),
    ("js", "indis", "reward − distilled"),
    # each instance-level method against the per-image teacher match (OSS searched on each image: a zoo row)
    ("js", "oss-image", "one-shot − teacher match"),
    ("tpdm (js)", "oss-image", "step-by-step − teacher match"),
    ("indis", "oss-image", "distilled − teacher match"),
)
#: rows a learned row is contrasted with as a fixed reference (one schedule source, no training seeds)
REFERENCE_ROWS = ("oss-image",)
CSV_FIELDS = ["backbone", "model_id", "steps", "contrast", "a", "b", "delta", "stderr", "df", "ci_low", "ci_high", "p", "image_se",
              "seed_sd", "train_seeds", "seeds_to_resolve", "stderr_unpaired_seeds"]
DIGITS = 6


def _section(row: dict) -> tuple[str, str, int]:
    return (row["backbone"], row["model_id"], int(row["steps"]))


def section_contrasts(table, run_of, suite) -> list[dict]:
    """The headline contrasts of one section (a leaderboard Table) from its rows' per-image runs (`run_of(table,
    row)` -> EvalRun or None, as compare keeps them); a pair is left out unless both rows are learned rows
    (several training seeds), or the first is and the second a REFERENCE_ROWS row, evaluated on the same
    images."""
    metric = suite.primary_metric
    rows = {r["method"]: r for r in table.rows}
    out = []
    for a, b, name in HEADLINE_CONTRASTS:
        if a not in rows or b not in rows:
            continue
        run_a, run_b = run_of(table, rows[a]), run_of(table, rows[b])
        if run_a is None or run_b is None or run_a.train_seeds < 2 or (run_b.train_seeds < 2 and b not in REFERENCE_ROWS):
            continue
        items = [it for it, _ in run_a.rows()]
        if [(it.prompt, s) for it, s in run_b.rows()] != [(it.prompt, s) for it, s in run_a.rows()]:
            continue  # not on the same images: nothing to pair
        # the image part (the per-image difference of the seed means) and each seed's headline: the two terms
        # of the paired two-level estimate (results.paired_estimates' overall), and the power statement's
        diff = [{metric: x[metric] - y[metric]} for x, y in zip(run_a.scores, run_b.scores)]
        image = overall_of(suite, diff, items)
        per_seed = [[overall_of(suite, s, items).value for s in r.per_seed()] for r in (run_a, run_b)]
        if image is None or not all(per_seed):
            continue
        if run_b.train_seeds < 2:  # a fixed reference: every seed of a against the same images of b
            per_seed[1] = per_seed[1][:1] * len(per_seed[0])
        est = paired_two_level_estimate(per_seed[0], per_seed[1], metric_estimate(image))
        unpaired_var = sample_variance(per_seed[0]) / len(per_seed[0]) + sample_variance(per_seed[1]) / len(per_seed[1])
        if len(per_seed[0]) == len(per_seed[1]):
            seed_var = sample_variance([x - y for x, y in zip(*per_seed)])
        else:  # unpaired seeds: each row's seed variance adds
            seed_var = sample_variance(per_seed[0]) + sample_variance(per_seed[1])
        need = seeds_to_resolve(RESOLVE_DIFFERENCE, image.stderr, seed_var, image.df) if image.df > 0 else None
        out.append({"backbone": table.backbone, "model_id": table.model_id, "steps": int(table.steps), "contrast": name, "a": a, "b": b,
                    "delta": est.value, "stderr": est.stderr, "df": est.df, "ci_low": est.ci_low, "ci_high": est.ci_high, "p": est.p,
                    "image_se": image.stderr, "seed_sd": math.sqrt(seed_var), "train_seeds": min(len(per_seed[0]), len(per_seed[1])),
                    "seeds_to_resolve": need, "stderr_unpaired_seeds": math.sqrt(image.stderr**2 + unpaired_var)})
    return out


def contrasts_path(leaderboard_dir: Path, suite: str) -> Path:
    return Path(leaderboard_dir) / f"{suite}.contrasts.csv"


def read_contrasts(path: Path) -> list[dict]:
    """The committed contrasts (an absent file: none), numbers parsed; `seeds_to_resolve` None where no seed
    count resolves the difference (the image part alone is too wide)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for r in csv.DictReader(io.StringIO(path.read_text())):
        row = dict(r)
        row["steps"], row["train_seeds"] = int(row["steps"]), int(row["train_seeds"])
        for k in ("delta", "stderr", "df", "ci_low", "ci_high", "p", "image_se", "seed_sd", "stderr_unpaired_seeds"):
            row[k] = float(row[k])
        row["seeds_to_resolve"] = int(row["seeds_to_resolve"]) if row["seeds_to_resolve"] else None
        out.append(row)
    return out


def render_contrasts_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{r[k]:.{DIGITS}f}" if isinstance(r[k], float) and math.isfinite(r[k]) else
                        "" if r[k] is None else r[k]) for k in CSV_FIELDS})
    return buf.getvalue()


def write_contrasts(path: Path, fresh: list[dict], sections: list[tuple[str, str, int]], order: list[tuple[str, str, int]]) -> list[dict]:
    """Write the file: the `sections` this run evaluated get `fresh`'s contrasts, every other section keeps
    its committed ones; sections in `order` (the page's), contrasts in HEADLINE_CONTRASTS' order; no rows at
    all, no file. Returns the rows as read back (rounded as written, so the page reads the same whoever
    wrote the section)."""
    renewed = set(sections)
    kept = [r for r in read_contrasts(path) if _section(r) not in renewed]
    rank = {name: i for i, (_, _, name) in enumerate(HEADLINE_CONTRASTS)}
    position = {s: i for i, s in enumerate(order)}
    rows = sorted(kept + fresh, key=lambda r: (position.get(_section(r), len(position)), rank.get(r["contrast"], len(rank))))
    rows = [r for r in rows if _section(r) in position]  # a section gone from the leaderboard takes its contrasts along
    if not rows:  # no section has two learned rows: no file (a page of fixed schedules has nothing to contrast)
        Path(path).unlink(missing_ok=True)
        return []
    write_text_atomic(path, render_contrasts_csv(rows))
    return read_contrasts(path)


def contrast_lines(rows: list[dict]) -> list[str]:
    """A section's contrasts as a Markdown table, with the lines saying what its columns are."""
    if not rows:
        return []
    level = f"{LEVEL:.0%}"
    out = ["Headline contrasts (paired on the same images and by training seed):", "",
           f"| contrast | Δ ± SE | {level} t interval | df | p | seeds | seeds to resolve {RESOLVE_DIFFERENCE} |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        need = str(r["seeds_to_resolve"]) if r["seeds_to_resolve"] is not None else "– (images)"
        out.append(f"| {r['contrast']} | {r['delta']:+.3f} ± {r['stderr']:.3f} | [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] | {r['df']:.1f} | "
                   f"{r['p']:.3f} | {r['train_seeds']} | {need} |")
    out += ["", f"Seeds to resolve: training seeds per row for {RESOLVE_POWER:.0%} power at the {level} level against a",
            f"difference of {RESOLVE_DIFFERENCE}, at this spread; – (images): no seed count, the image part alone is too wide."]
    return out

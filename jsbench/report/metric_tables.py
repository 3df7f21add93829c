"""A suite's further metrics beside its leaderboard: every row's value of each, overall and per task.

The leaderboard ranks by the suite's primary metric; a suite that declares `leaderboard_metrics` (the OCR
suite: MARIO-Eval's accuracy, precision, recall, F-measure and the normalised edit distance) also gets
`leaderboards/<suite>.metrics.csv` (one line per backbone, model, budget, row, task and metric) and a
Markdown section per budget on its page. A compare replaces the budgets it evaluated and keeps the others,
like the leaderboard itself. Each value's SE has its df and 95 % Student-t interval in the CSV (`df`,
`ci_low`, `ci_high`, as the leaderboard's; "" in lines written before them). A section is one protocol too
(the ocr suite's `words` or `mario`, lines written before it was recorded counting as the suite's
`unrecorded_provenance`): a run replaces its own protocol's section and leaves another's beside it, the
headings naming the protocol where a budget holds two.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Sequence

from jsbench.io import write_text_atomic
from jsbench.report.leaderboard import method_rank, read_committed
from jsbench.evaluation.results import PROVENANCE_FIELDS, Record
from jsbench.stats import SE_LEGEND, t_interval

__all__ = ["METRICS_CSV_FIELDS", "metrics_csv_path", "metric_rows", "merge_metric_rows", "render_metric_tables", "write_metric_tables"]

METRICS_CSV_FIELDS = ["backbone", "model_id", "steps", "method", "task", "metric", "value", "stderr", "n_images", "n_prompts",
                      *PROVENANCE_FIELDS, "df", "ci_low", "ci_high"]
TITLES = {"accuracy": "accuracy", "precision": "precision", "recall": "recall", "f_measure": "F", "ned": "NED",
          "word_accuracy": "word acc."}


def metrics_csv_path(leaderboard_dir: Path, suite: str) -> Path:
    return Path(leaderboard_dir) / f"{suite}.metrics.csv"


def metric_rows(records: Sequence[Record], metrics: Sequence[str], steps_list: Sequence[int]) -> list[dict]:
    """The records of `metrics` as CSV rows, filed under their section's budget (the ceiling under each)."""
    out = []
    for r in records:
        if r.metric not in metrics:
            continue
        df = math.nan if r.df is None else float(r.df)
        lo, hi = t_interval(float(r.value), float(r.stderr), df)
        interval = {k: "" if math.isnan(v) else repr(float(v)) for k, v in (("df", df), ("ci_low", lo), ("ci_high", hi))}
        for steps in ([r.budget] if r.budget is not None else list(steps_list)):
            out.append({"backbone": r.backbone, "model_id": r.model_id, "steps": str(steps), "method": r.method, "task": r.task,
                        "metric": r.metric, "value": repr(float(r.value)), "stderr": repr(float(r.stderr)),
                        "n_images": str(r.n_images), "n_prompts": str(r.n_prompts),
                        **{f: str(getattr(r, f) or "") for f in PROVENANCE_FIELDS}, **interval})
    return out


def _section(row: dict, unrecorded: dict) -> tuple[str, str, str, str]:
    """A row's section: backbone, model, budget and protocol (the suite's unrecorded one where it has none)."""
    return row["backbone"], row["model_id"], row["steps"], row.get("protocol") or str(unrecorded.get("protocol") or "")


def merge_metric_rows(committed: list[dict], fresh: list[dict], unrecorded: dict | None = None) -> list[dict]:
    """The committed rows of every section this run did not evaluate, then this run's."""
    unrecorded = unrecorded or {}
    done = {_section(r, unrecorded) for r in fresh}
    kept = [{f: r.get(f, "") for f in METRICS_CSV_FIELDS} for r in committed if _section(r, unrecorded) not in done]
    return kept + fresh


def _cell(value: str, stderr: str) -> str:
    v, s = float(value), float(stderr)
    if math.isnan(v):
        return "–"
    return f"{v:.3f}" if math.isnan(s) else f"{v:.3f} ± {s:.3f}"


def render_metric_tables(rows: list[dict], metrics: Sequence[str], about: str = "", unrecorded: dict | None = None) -> str:
    """Per (backbone, model, budget, protocol): a table of row x task (overall first), a column per metric."""
    unrecorded = unrecorded or {}
    out = ["## Further metrics", ""] + ([about, ""] if about else [])
    section_of = lambda r: (r["backbone"], r["model_id"], int(r["steps"]), _section(r, unrecorded)[3])  # noqa: E731
    sections = sorted({section_of(r) for r in rows})
    for backbone, model_id, steps, protocol in sections:
        here = [r for r in rows if section_of(r) == (backbone, model_id, steps, protocol)]
        cols = [m for m in metrics if any(r["metric"] == m for r in here)]
        shared = sum(s[:3] == (backbone, model_id, steps) for s in sections) > 1  # a budget scored under two protocols
        heading = f"### {backbone} · {steps} steps" + (f" · protocol {protocol}" if shared else "")
        out += [heading, "", "| row | task | " + " | ".join(TITLES.get(m, m) for m in cols) + " |",
                "|---|---|" + "---:|" * len(cols)]
        tasks = ["overall"] + sorted({r["task"] for r in here} - {"overall"}, key=lambda t: min(i for i, r in enumerate(here) if r["task"] == t))
        cell = {(r["method"], r["task"], r["metric"]): _cell(r["value"], r["stderr"]) for r in here}
        for method in sorted({r["method"] for r in here}, key=method_rank):
            for task in tasks:
                if any((method, task, m) in cell for m in cols):
                    out.append(f"| {method} | {task} | " + " | ".join(cell.get((method, task, m), "–") for m in cols) + " |")
        out += ["", SE_LEGEND, ""]
    return "\n".join(out)


def write_metric_tables(leaderboard_dir: Path, suite, records: Sequence[Record], steps_list: Sequence[int]) -> tuple[Path, str]:
    """Merge this run's further metrics into `<suite>.metrics.csv`; (its path, the page's Markdown section)."""
    metrics = tuple(suite.leaderboard_metrics)
    unrecorded = suite.unrecorded_provenance
    path = metrics_csv_path(leaderboard_dir, suite.name)
    rows = merge_metric_rows(read_committed(path, METRICS_CSV_FIELDS), metric_rows(records, metrics, steps_list), unrecorded)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, METRICS_CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, buf.getvalue())
    # rendered from the file as written, as the primary tables are: the same digits whichever run made a row
    return path, render_metric_tables(read_committed(path, METRICS_CSV_FIELDS), _all_metrics(suite, metrics), suite.leaderboard_about,
                                      unrecorded)


def _all_metrics(suite, metrics: Sequence[str]) -> tuple[str, ...]:
    """The columns the page may show: this run's metrics, then those a kept section of another protocol has
    (the ocr suite's `words` shows NED and word accuracy beside MARIO's)."""
    return tuple(dict.fromkeys([*metrics, *suite.all_leaderboard_metrics]))

"""Leaderboard statistics: per-task prompt and image counts, and the paired difference to the global row."""

from __future__ import annotations

import csv
import io
import random

import pytest

from jsbench.evaluation.evaluate import EvalRun
from jsbench.report.leaderboard import add_reference_deltas, build_tables, render_csv, render_markdown, tables_from_csv
from jsbench.evaluation.results import make_records
from jsbench.suites.base import EvalItem, Suite, aggregate_by_task


class _Suite(Suite):
    name = "toy"
    primary_metric = "correct"

    def aggregate(self, scores, items):
        return aggregate_by_task(scores, items)


class _Backbone:
    name = "toy-backbone"
    model_id = "toy/model"


class _Source:
    def __init__(self, label: str, steps: int = 3):
        self.label, self.spec, self.steps, self.checksum = label, label, steps, None
        self.budget = steps


ITEMS = [EvalItem(f"a{i}", "a") for i in range(3)] + [EvalItem(f"b{i}", "b") for i in range(5)]
SEEDS = [0, 1, 2, 3]


def _run(p_correct: dict[str, float], seed: int) -> EvalRun:
    rng = random.Random(seed)
    scores = [{"correct": float(rng.random() < p_correct[it.task])} for it in ITEMS for _ in SEEDS]
    return EvalRun(items=ITEMS, seeds=SEEDS, scores=scores)


@pytest.fixture()
def board():
    suite, bb = _Suite(), _Backbone()
    runs = {"default": _run({"a": 0.3, "b": 0.5}, 1), "global": _run({"a": 0.5, "b": 0.6}, 2), "js": _run({"a": 0.7, "b": 0.8}, 3)}
    records = []
    for label, run in runs.items():
        records += make_records(bb, suite, _Source(label), run, reference=None if label == "default" else runs["default"])
    tables = build_tables(records, "toy", "correct")
    add_reference_deltas(tables, lambda t, row: runs.get(row["method"]), suite)
    return tables, runs, suite


def test_csv_counts_are_each_tasks_own(board):
    tables, _, _ = board
    lines = list(csv.DictReader(io.StringIO(render_csv(tables))))
    counts = {(r["method"], r["task"]): (r["n_prompts"], r["n_images"]) for r in lines}
    for method in ("default", "global", "js"):
        assert counts[(method, "a")] == ("3", str(3 * len(SEEDS)))
        assert counts[(method, "b")] == ("5", str(5 * len(SEEDS)))
        assert counts[(method, "overall")] == ("8", str(8 * len(SEEDS)))
    # and they survive a round trip through the CSV (a later run keeps sections it did not evaluate)
    again = list(csv.DictReader(io.StringIO(render_csv(tables_from_csv(lines)))))
    assert [(r["n_prompts"], r["n_images"], r["delta_global"]) for r in again] == [(r["n_prompts"], r["n_images"], r["delta_global"]) for r in lines]


def test_every_row_has_a_paired_delta_vs_global(board):
    tables, runs, suite = board
    rows = {r["method"]: r for r in tables[0].rows}
    assert "delta_global" not in rows["global"]
    for method in ("default", "js"):
        # by hand: per-image differences to the global run, aggregated as the suite aggregates
        diff = [{"correct": a["correct"] - b["correct"]} for a, b in zip(runs[method].scores, runs["global"].scores)]
        overall = next(m for m in aggregate_by_task(diff, [it for it, _ in runs[method].rows()]) if m.task == "overall")
        assert rows[method]["delta_global"] == pytest.approx(overall.value)
        assert rows[method]["delta_global_stderr"] == pytest.approx(overall.stderr)
        # one training seed: the df is the Satterthwaite df of the two tasks' clustered SEs (2 and 4 df)
        a, b = (m.stderr**2 / 4 for m in aggregate_by_task(diff, [it for it, _ in runs[method].rows()]) if m.task != "overall")
        assert rows[method]["delta_global_df"] == pytest.approx((a + b) ** 2 / (a**2 / 2 + b**2 / 4))
    # default's difference to global is minus global's to default
    assert rows["default"]["delta_global"] == pytest.approx(-rows["global"]["delta"])
    md = render_markdown(tables, "toy", "correct", "jsbench compare")
    assert "| method | steps | train seeds | a | b | overall | Δ vs default | Δ vs global |" in md
    assert md.count("± is one standard error, clustered by prompt") == len(tables)  # a legend under every table
    assert "Prompts/images per task (every row is scored on the same ones): a 3/12, b 5/20, overall 8/32." in md
    js_line = next(line for line in md.splitlines() if line.startswith("| js |"))
    assert js_line.endswith(f"{rows['js']['delta_global']:+.3f} ± {rows['js']['delta_global_stderr']:.3f} |")


def test_rows_not_on_the_globals_prompts_get_no_delta(board):
    tables, runs, suite = board
    other = EvalRun(items=ITEMS[::-1], seeds=SEEDS, scores=runs["js"].scores)
    for row in tables[0].rows:
        row.pop("delta_global", None)
    add_reference_deltas(tables, lambda t, row: other if row["method"] == "js" else runs.get(row["method"]), suite)
    rows = {r["method"]: r for r in tables[0].rows}
    assert "delta_global" not in rows["js"] and "delta_global" in rows["default"]
    # a section without a global row: nothing to pair with
    add_reference_deltas(tables, lambda t, row: None, suite)

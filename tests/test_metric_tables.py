"""The OCR leaderboard's further metrics: MARIO-Eval's per row and task, merged by budget like the leaderboard."""

from __future__ import annotations

import csv
from types import SimpleNamespace

from jsbench.report.metric_tables import metric_rows, metrics_csv_path, write_metric_tables
from jsbench.evaluation.results import Record


def _record(method, steps, budget, task, metric, value):
    return Record(backbone="analytic", model_id="jsbench/analytic-scenes", steps=steps, budget=budget, method=method,
                  schedule=method, suite="ocr", task=task, metric=metric, value=value, stderr=0.01, n_images=8,
                  n_prompts=4, seeds=[0, 1], policy_checksum=None, jsbench_version="0", git_commit=None, created=0.0,
                  ocr_engine="rapidocr", prompt_set="abc")


def test_rows_by_budget_ceiling_in_every_budget_and_merge(tmp_path):
    suite = SimpleNamespace(name="ocr", leaderboard_metrics=("accuracy", "f_measure"), leaderboard_about="On our prompts.",
                            all_leaderboard_metrics=(), unrecorded_provenance={})
    recs = [_record("default", 3, 3, t, m, v) for t, m, v in (("overall", "accuracy", 0.5), ("one_word", "accuracy", 0.75),
                                                                ("overall", "f_measure", 0.6), ("overall", "word_accuracy", 0.7))]
    recs.append(_record("ceiling (200 steps)", 200, None, "overall", "accuracy", 1.0))
    rows = metric_rows(recs, suite.leaderboard_metrics, [3, 5])
    assert {(r["method"], r["steps"]) for r in rows} == {("default", "3"), ("ceiling (200 steps)", "3"), ("ceiling (200 steps)", "5")}
    assert all(r["metric"] != "word_accuracy" and r["ocr_engine"] == "rapidocr" for r in rows)
    path, md = write_metric_tables(tmp_path, suite, recs, [3, 5])
    assert path == metrics_csv_path(tmp_path, "ocr") and "On our prompts." in md
    assert "| default | overall | 0.500 ± 0.010 | 0.600 ± 0.010 |" in md and "| default | one_word | 0.750 ± 0.010 | – |" in md
    assert md.index("| default | overall") < md.index("| ceiling (200 steps) | overall")
    # a later run at 5 steps only replaces the 5-step section and keeps the 3-step one
    later = [_record("default", 5, 5, "overall", "accuracy", 0.9)]
    write_metric_tables(tmp_path, suite, later, [5])
    kept = list(csv.DictReader(open(path)))
    assert {(r["method"], r["steps"]) for r in kept} == {("default", "3"), ("ceiling (200 steps)", "3"), ("default", "5")}

"""Headline contrasts: paired by image and training seed, with the t interval and the seeds that would
resolve 0.02; kept for the sections a compare run does not evaluate; shown under their section."""

from __future__ import annotations

import math

import pytest

from jsbench.report.contrasts import contrast_lines, read_contrasts, section_contrasts, write_contrasts
from jsbench.evaluation.evaluate import EvalRun, mean_over_seeds
from jsbench.report.leaderboard import Table, render_markdown
from jsbench.report.power import seeds_to_resolve
from jsbench.stats import cluster_mean, paired_two_level_estimate
from jsbench.suites.base import EvalItem, aggregate_by_task


class _Suite:
    name = "toy"
    primary_metric = "correct"

    def aggregate(self, scores, items):
        return aggregate_by_task(scores, items)


ITEMS = [EvalItem(f"p{i}", "t") for i in range(6)]


def _row(per_seed):
    """A learned row: one EvalRun per training seed (2 images a prompt), then their mean."""
    return mean_over_seeds([EvalRun(items=ITEMS, seeds=[0, 1], scores=[{"correct": float(v)} for v in s]) for s in per_seed])


JS = _row([[1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1], [1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1]])
GLOBAL = _row([[1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1], [0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1]])
RLOO = _row([[1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1], [1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 0, 1]])
DEFAULT = EvalRun(items=ITEMS, seeds=[0, 1], scores=[{"correct": 0.0}] * 12)


def _table(steps=3, backbone="toy"):
    rows = [{"method": m, "steps": steps, "t": 0.5, "overall": 0.5, "stderr": 0.01} for m in ("default", "global", "js", "rloo")]
    return Table(backbone=backbone, model_id="toy/1", steps=steps, tasks=["t"], rows=rows)


RUNS = {"default": DEFAULT, "global": GLOBAL, "js": JS, "rloo": RLOO}


def test_a_contrast_by_hand():
    [ig, jr] = section_contrasts(_table(), lambda t, row: RUNS[row["method"]], _Suite())
    assert (ig["contrast"], ig["a"], ig["b"]) == ("instance − global", "js", "global") and jr["contrast"] == "js − rloo"
    # by hand: per-seed overall values, the per-image difference of the seed means clustered by prompt
    a = [sum(r.scores[i]["correct"] for i in range(12)) / 12 for r in (EvalRun(ITEMS, [0, 1], s) for s in JS.seed_scores)]
    b = [sum(r.scores[i]["correct"] for i in range(12)) / 12 for r in (EvalRun(ITEMS, [0, 1], s) for s in GLOBAL.seed_scores)]
    diff = [x["correct"] - y["correct"] for x, y in zip(JS.scores, GLOBAL.scores)]
    image = cluster_mean(diff, [it.prompt for it in ITEMS for _ in range(2)])
    est = paired_two_level_estimate(a, b, image)
    assert ig["delta"] == pytest.approx(est.value) and ig["stderr"] == pytest.approx(est.stderr) and ig["df"] == pytest.approx(est.df)
    assert (ig["ci_low"], ig["ci_high"], ig["p"]) == pytest.approx((est.ci_low, est.ci_high, est.p))
    d = [x - y for x, y in zip(a, b)]
    m = sum(d) / 3
    seed_var = sum((x - m) ** 2 for x in d) / 2
    assert ig["image_se"] == pytest.approx(image.stderr) and ig["seed_sd"] == pytest.approx(math.sqrt(seed_var)) and ig["train_seeds"] == 3
    assert ig["seeds_to_resolve"] == seeds_to_resolve(0.02, image.stderr, seed_var, image.df)
    var = lambda v: sum((x - sum(v) / 3) ** 2 for x in v) / 2  # noqa: E731
    assert ig["stderr_unpaired_seeds"] == pytest.approx(math.sqrt(image.stderr**2 + var(a) / 3 + var(b) / 3))


def test_only_pairs_of_learned_rows():
    one_seed = EvalRun(items=ITEMS, seeds=[0, 1], scores=JS.scores)
    runs = {**RUNS, "js": one_seed}
    assert section_contrasts(_table(), lambda t, row: runs[row["method"]], _Suite()) == []
    assert section_contrasts(_table(), lambda t, row: None, _Suite()) == []


def test_a_learned_row_against_the_teacher_match_counts_its_own_seeds_only():
    """oss-image is one schedule source: js − oss-image pairs the images, and its seed term is js's alone."""
    oss_image = EvalRun(items=ITEMS, seeds=[0, 1], scores=[{"correct": float(v)} for v in [1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1]])
    runs = {**RUNS, "oss-image": oss_image}
    table = _table()
    table.rows.append({"method": "oss-image", "steps": 3, "t": 0.5, "overall": 0.5, "stderr": 0.01})
    got = {r["contrast"]: r for r in section_contrasts(table, lambda t, row: runs[row["method"]], _Suite())}
    assert set(got) == {"instance − global", "js − rloo", "one-shot − teacher match"}  # default stays out: not a reference row
    r = got["one-shot − teacher match"]
    b = sum(x["correct"] for x in oss_image.scores) / 12
    a = [sum(x["correct"] for x in s) / 12 for s in JS.seed_scores]
    diff = [x["correct"] - y["correct"] for x, y in zip(JS.scores, oss_image.scores)]
    image = cluster_mean(diff, [it.prompt for it in ITEMS for _ in range(2)])
    est = paired_two_level_estimate(a, [b] * 3, image)
    assert (r["a"], r["b"], r["train_seeds"]) == ("js", "oss-image", 3)
    assert (r["delta"], r["stderr"], r["df"]) == pytest.approx((est.value, est.stderr, est.df))
    var_a = sum((x - sum(a) / 3) ** 2 for x in a) / 2
    assert r["seed_sd"] == pytest.approx(math.sqrt(var_a))  # the method's seed spread, the reference adding none
    assert r["stderr_unpaired_seeds"] == pytest.approx(math.sqrt(image.stderr**2 + var_a / 3))


def test_the_file_keeps_other_sections_and_the_page_shows_them(tmp_path):
    path = tmp_path / "toy.contrasts.csv"
    first, second = _table(3), _table(5)
    order = [("toy", "toy/1", 3), ("toy", "toy/1", 5)]
    rows3 = section_contrasts(first, lambda t, row: RUNS[row["method"]], _Suite())
    write_contrasts(path, rows3, [order[0]], order)
    swapped = {**RUNS, "js": RLOO, "rloo": JS}
    rows5 = section_contrasts(second, lambda t, row: swapped[row["method"]], _Suite())
    kept = write_contrasts(path, rows5, [order[1]], order)  # a run of budget 5 only keeps budget 3's
    assert [(r["steps"], r["contrast"]) for r in kept] == [(3, "instance − global"), (3, "js − rloo"), (5, "instance − global"), (5, "js − rloo")]
    assert kept[0]["delta"] == pytest.approx(rows3[0]["delta"], abs=1e-6) and read_contrasts(path) == kept
    assert kept[3]["delta"] == pytest.approx(-rows3[1]["delta"], abs=1e-6)
    # a section gone from the page takes its contrasts along; none left, no file
    assert [r["steps"] for r in write_contrasts(path, [], [], order[1:])] == [5, 5]
    assert write_contrasts(tmp_path / "none.csv", [], [], order) == [] and not (tmp_path / "none.csv").exists()
    page = render_markdown([first, second], "toy", "correct", "jsbench compare", contrasts=kept)
    lines = contrast_lines([r for r in kept if r["steps"] == 3])
    assert "\n".join(lines) in page and page.index(lines[0]) < page.index("## toy · toy/1 · 5 steps")
    r = kept[0]
    assert f"| instance − global | {r['delta']:+.3f} ± {r['stderr']:.3f} | [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] |" in page

"""The CI regression check and its reports (issue 18): paired standard errors, verdicts in both
directions, missing rows, and the Markdown / JSON / JUnit files a CI system shows."""

from __future__ import annotations

import csv
import json
import math
import shutil
import xml.etree.ElementTree as ET

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.evaluation.evaluate import EvalRun
from jsbench.report.leaderboard import CSV_FIELDS, provenance_key
from jsbench.policy.schedule_policy import make_policy
from jsbench.report.regression_check import CheckError, check_against_committed, read_scores, row_key, scores_entry
from jsbench.report.regression_reports import render_json, render_junit, render_markdown, report_format
from jsbench.stats import cluster_mean
from jsbench.suites.base import EvalItem, Suite, aggregate_by_task

# --- library level: a two-task suite and hand-made per-image scores ---------------------------------


class TwoTasks(Suite):
    name = "toy"
    primary_metric = "correct"

    def aggregate(self, scores, items):
        return aggregate_by_task(scores, items)


ITEMS = [EvalItem(f"prompt {i}", "a" if i < 3 else "b") for i in range(6)]
SEEDS = [0, 1]
KEY = ("toy-bb", "toy/model", 3, "js")


def _run(values):
    assert len(values) == len(ITEMS) * len(SEEDS)
    return EvalRun(items=ITEMS, seeds=SEEDS, scores=[{"correct": float(v)} for v in values])


def _committed(key, run, suite=TwoTasks(), with_scores=True, provenance=None):
    """CSV lines exactly as leaderboard.render_csv writes them, and the scores file's line for the row."""
    metrics = {m.task: m for m in suite.aggregate(run.scores, [it for it, _ in run.rows()])}
    lines = [
        {"backbone": key[0], "model_id": key[1], "steps": str(key[2]), "method": key[3], "task": t, "value": f"{m.value:.6f}",
         "stderr": f"{m.stderr:.6f}" if t == "overall" else "", "delta": "", "delta_stderr": "", "n_images": str(metrics["overall"].n_images), **(provenance or {})}
        for t, m in metrics.items()
    ]
    entry = scores_entry(key, suite.name, "correct", run, {t: m.value for t, m in metrics.items()}, provenance)
    scores = {(key, provenance_key(provenance or {})): entry} if with_scores else {}
    return lines, scores


def _check(committed_run, fresh_runs, tolerance=2.0, strict=False, with_scores=True):
    lines, scores = _committed(KEY, committed_run, with_scores=with_scores)
    return check_against_committed(lines, scores, fresh_runs, TwoTasks(), KEY[0], KEY[1], [3], tolerance=tolerance, strict=strict)


BASE = [1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0]


def test_identical_runs_are_unchanged_with_zero_paired_stderr():
    report = _check(_run(BASE), {KEY: _run(BASE)})
    assert {r.task for r in report.rows} == {"a", "b", "overall"}
    for r in report.rows:
        assert r.verdict == "unchanged" and not r.changed and r.paired
        assert r.delta == 0.0 and r.delta_stderr == 0.0 and r.images_up == r.images_down == 0
    assert report.exit_code == 0 and "passed" in report.headline


def test_paired_stderr_is_that_of_the_per_image_differences():
    fresh = list(BASE)
    fresh[0], fresh[2], fresh[7] = 0, 1, 1  # task a: one image down, one up; task b: one up
    report = _check(_run(BASE), {KEY: _run(fresh)}, tolerance=2.0)
    rows = {r.task: r for r in report.rows}
    diff_a = [f - c for f, c in zip(fresh[:6], BASE[:6])]
    diff_b = [f - c for f, c in zip(fresh[6:], BASE[6:])]
    # clustered by prompt (two seeds each), as every SE of jsbench.stats
    prompts = [ITEMS[i // 2].prompt for i in range(12)]
    ea, eb = cluster_mean(diff_a, prompts[:6]), cluster_mean(diff_b, prompts[6:])
    (ma, sa), (mb, sb) = (ea.value, ea.stderr), (eb.value, eb.stderr)
    assert rows["a"].delta == pytest.approx(ma) and rows["a"].delta_stderr == pytest.approx(sa)
    assert rows["a"].fresh == pytest.approx(sum(fresh[:6]) / 6) and rows["a"].committed == pytest.approx(sum(BASE[:6]) / 6)
    assert all(r.fresh == pytest.approx(r.committed + r.delta) for r in report.rows)
    assert rows["b"].delta == pytest.approx(mb) and rows["b"].delta_stderr == pytest.approx(sb)
    assert rows["overall"].delta == pytest.approx((ma + mb) / 2)
    assert rows["overall"].delta_stderr == pytest.approx(math.sqrt(sa**2 + sb**2) / 2)
    # the paired SE is not the unpaired one: the unchanged images cancel
    assert rows["b"].delta_stderr < math.sqrt(2) * cluster_mean(fresh[6:], prompts[6:]).stderr
    assert (rows["a"].images_up, rows["a"].images_down) == (1, 1) and rows["overall"].n_images == 12
    # task a moved (one image up, one down) but its mean did not: still reported as a change
    assert rows["a"].verdict == "unchanged" and rows["a"].changed and rows["a"] in report.moved_within
    assert rows["b"].verdict == "unchanged" and rows["b"].allowed_drop == pytest.approx(2 * sb)
    # with no tolerance, any rise of the mean is an improvement
    assert {r.task: r.verdict for r in _check(_run(BASE), {KEY: _run(fresh)}, tolerance=0.0).rows}["b"] == "improved"


def test_drops_beyond_tolerance_regress_and_rises_improve():
    worse = [0] * 12
    # task b's drop is -0.5 with a prompt-clustered SE of sqrt(1/12) (three prompts): 1.7 SE, so tolerance 1.5
    report = _check(_run(BASE), {KEY: _run(worse)}, tolerance=1.5)
    assert {r.verdict for r in report.rows} == {"regressed"} and report.exit_code == 1
    assert report.failed and "regressed" in report.headline
    assert {r.task: r.verdict for r in _check(_run(BASE), {KEY: _run(worse)}).rows}["b"] == "unchanged"  # 1.7 SE < 2
    report = _check(_run([0] * 12), {KEY: _run(BASE)}, tolerance=1.5)
    assert {r.verdict for r in report.rows} == {"improved"} and report.exit_code == 0


def test_missing_rows_are_reported_and_fail_only_when_strict():
    other = ("toy-bb", "toy/model", 3, "default")
    report = _check(_run(BASE), {other: _run(BASE)})
    assert {r.verdict for r in report.rows} == {"missing"} and report.exit_code == 0
    assert report.new_rows == ["default (3 steps)"]
    strict = _check(_run(BASE), {other: _run(BASE)}, strict=True)
    assert strict.exit_code == 1 and "missing" in strict.headline


def test_without_committed_scores_the_check_is_unpaired_and_says_so():
    report = _check(_run(BASE), {KEY: _run(BASE)}, with_scores=False)
    assert all(r.verdict == "unchanged" and not r.paired and "unpaired" in r.note for r in report.rows)
    assert "unpaired" in render_markdown(report)
    report = _check(_run(BASE), {KEY: _run([0] * 12)}, with_scores=False)
    assert {r.verdict for r in report.rows} == {"regressed"}


def test_refusals_are_check_errors():
    with pytest.raises(CheckError, match="suffix"):
        report_format("r.txt")
    lines, scores = _committed(KEY, _run(BASE))
    three_seeds = EvalRun(items=ITEMS, seeds=[0, 1, 2], scores=[{"correct": 1.0}] * 18)
    with pytest.raises(CheckError, match="seeds"):
        check_against_committed(lines, scores, {KEY: three_seeds}, TwoTasks(), KEY[0], KEY[1], [3])
    entry = next(iter(scores.values()))
    entry["scores"][0] = 1.0 - entry["scores"][0]  # the scores file no longer matches its CSV
    with pytest.raises(CheckError, match="reproduce"):
        check_against_committed(lines, scores, {KEY: _run(BASE)}, TwoTasks(), KEY[0], KEY[1], [3])
    with pytest.raises(CheckError, match="compared nothing"):
        check_against_committed(lines, {}, {KEY: _run(BASE)}, TwoTasks(), "another", KEY[1], [3])


def test_scope_is_the_sections_of_this_run():
    lines, scores = _committed(KEY, _run(BASE))
    ceiling = ("toy-bb", "toy/model", 200, "ceiling (200 steps)")
    c_lines, c_scores = _committed(ceiling, _run(BASE))
    five = [{**line, "steps": "5"} for line in lines]
    other = [{**line, "backbone": "other-bb"} for line in lines]
    committed = [{**line, "budget": "3"} for line in lines + c_lines] + [{**line, "budget": "5"} for line in five + c_lines] + other
    report = check_against_committed(committed, {**scores, **c_scores}, {KEY: _run(BASE), ceiling: _run(BASE)}, TwoTasks(), KEY[0], KEY[1], [3])
    assert {(r.method, r.steps) for r in report.rows} == {("js", 3), ("ceiling (200 steps)", 200)}
    assert len(report.rows) == 6 and report.count("unchanged") == 6
    assert report.not_checked == {"toy-bb · 5 steps": 2, "other-bb · 3 steps": 1}


def test_provenance_picks_the_section_and_another_one_is_missing():
    """A section is one provenance (detector, prompt set, ...): the check pairs this run with the section of
    its own provenance; when the budget has none, the rows are missing, with the differing field named."""
    owl, m2f = {"detector": "owlv2"}, {"detector": "mask2former"}
    a_lines, a_scores = _committed(KEY, _run(BASE), provenance=owl)
    b_lines, b_scores = _committed(KEY, _run([0] * 12), provenance=m2f)
    committed, scores = a_lines + b_lines, {**a_scores, **b_scores}
    report = check_against_committed(committed, scores, {KEY: _run([0] * 12)}, TwoTasks(), KEY[0], KEY[1], [3], provenance=m2f)
    assert report.count("unchanged") == 3 and all(r.paired for r in report.rows)
    assert report.not_checked == {"toy-bb · 3 steps · detector owlv2": 1}
    report = check_against_committed(a_lines, a_scores, {KEY: _run(BASE)}, TwoTasks(), KEY[0], KEY[1], [3], provenance=m2f)
    assert {r.verdict for r in report.rows} == {"missing"} and "detector owlv2 (this run: mask2former)" in report.rows[0].note
    # a leaderboard written before provenance was recorded fits any run
    plain_lines, plain_scores = _committed(KEY, _run(BASE))
    report = check_against_committed(plain_lines, plain_scores, {KEY: _run(BASE)}, TwoTasks(), KEY[0], KEY[1], [3], provenance=m2f)
    assert report.count("unchanged") == 3


def test_scores_file_keeps_rows_that_still_match_and_drops_stale_ones(tmp_path):
    from jsbench.report.leaderboard import Table
    from jsbench.report.regression_check import write_scores

    path = tmp_path / "toy.scores.jsonl"
    run = _run(BASE)
    metrics = {m.task: m.value for m in TwoTasks().aggregate(run.scores, [it for it, _ in run.rows()])}
    row = {"method": "js", "steps": 3, **{t: v for t, v in metrics.items() if t != "overall"}, "overall": metrics["overall"]}
    table = Table("toy-bb", "toy/model", 3, ["a", "b"], [row])
    write_scores(path, [table], {KEY: run}, "toy", "correct")
    assert list(read_scores(path)) == [(KEY, provenance_key({}))]
    # a later run of another section: the row is kept from the file (its CSV values, rounded, still match) ...
    rounded = {k: (float(f"{v:.6f}") if isinstance(v, float) else v) for k, v in row.items()}
    write_scores(path, [Table("toy-bb", "toy/model", 3, ["a", "b"], [rounded])], {}, "toy", "correct")
    assert read_scores(path)[(KEY, provenance_key({}))]["scores"] == [float(v) for v in BASE]
    # ... and dropped once the row's values are no longer the ones its scores give
    write_scores(path, [Table("toy-bb", "toy/model", 3, ["a", "b"], [{**rounded, "overall": 0.1}])], {}, "toy", "correct")
    assert read_scores(path) == {}


def test_reports_in_three_formats(tmp_path):
    report = _check(_run(BASE), {KEY: _run([0] * 12)}, tolerance=1.5)  # every task regressed (see above)
    md = render_markdown(report)
    assert md.splitlines()[0].startswith("### ❌") and md.index("#### Regressions") < md.index("<details>")
    assert "1.5 × SE(Δ)" in md and "`correct`" in md
    data = json.loads(render_json(report))
    assert data["exit_code"] == 1 and data["counts"]["regressed"] == 3
    assert data["tolerance"]["multiplier"] == 1.5 and data["tolerance"]["allowed_drop_unit"] == "correct"
    assert {r["verdict"] for r in data["rows"]} == {"regressed"} and all(r["paired"] for r in data["rows"])
    root = ET.fromstring(render_junit(report))
    cases = root.findall(".//testcase")
    assert len(cases) == 3 and all(c.find("failure") is not None for c in cases)
    assert root.get("failures") == "3"


# --- end to end: `jsbench compare --check --report` on the embedded world -------------------------------


def _ship(root, bias):
    """A shipped 3-step global policy on `analytic`; bias < 0 front-loads the steps (better than the
    default schedule here), bias > 0 back-loads them (worse)."""
    bb = load_backbone("analytic")
    policy = make_policy(bb, 3, "global")
    with torch.no_grad():
        policy.delta.copy_(torch.linspace(-bias, bias, 3))
    folder = root / "policies" / "analytic" / "global-n3"
    shutil.rmtree(folder, ignore_errors=True)
    return policy.save(folder, {"backbone": "analytic", "baseline": "js", "reward": "geneval"})


@pytest.mark.slow
def test_compare_check_report_worse_better_and_missing(cli, tmp_path):
    _ship(tmp_path, 0.0)
    # no zoo rows: the verdicts are about the shipped policy, and the zoo's per-image teacher DP is most of a compare's time
    args = ["compare", "--steps", "3", "--seeds", "1", "--zoo", "none", "--policies", tmp_path / "policies",
            "--records", tmp_path / "rec.jsonl", "--leaderboards", tmp_path / "lb", "--no-progress", "--no-plots"]
    code, out, err = cli(*args)
    assert code == 0, err
    scores = read_scores(tmp_path / "lb" / "geneval.scores.jsonl")
    committed = list(csv.DictReader(open(tmp_path / "lb" / "geneval.csv")))
    assert set(CSV_FIELDS) <= set(committed[0])
    assert {key[3] for key, _ in scores} == {r["method"] for r in committed}
    assert row_key("analytic", "jsbench/analytic-scenes", 3, "global") in {key for key, _ in scores}
    reports = [tmp_path / "r.md", tmp_path / "r.json", tmp_path / "r.xml"]
    check = [*args, "--check", *(x for p in reports for x in ("--report", p))]

    # unchanged: the same policies give the same images
    code, out, err = cli(*check)
    assert code == 0, err
    assert "passed" in out
    data = json.loads(reports[1].read_text())
    n_rows = len({(r["method"], r["steps"], r["task"]) for r in committed})
    assert data["counts"]["unchanged"] == n_rows == len(data["rows"]) and all(r["paired"] for r in data["rows"])

    # a deliberately worse policy under the same name: regressed in all three formats, exit 1
    _ship(tmp_path, 1.5)
    code, out, err = cli(*check)
    assert code == 1, err
    md = reports[0].read_text()
    assert md.startswith("### ❌") and "#### Regressions" in md and "| ❌ regressed | analytic | 3 | global | overall |" in md
    data = json.loads(reports[1].read_text())
    row = next(r for r in data["rows"] if r["method"] == "global" and r["task"] == "overall")
    assert data["exit_code"] == 1 and row["verdict"] == "regressed" and row["delta"] < -row["allowed_drop"] and row["images_down"] > 0
    assert all(r["verdict"] == "unchanged" for r in data["rows"] if r["method"] != "global")
    case = ET.parse(reports[2]).getroot().find(".//testcase[@name='global · overall']")
    assert case.find("failure").get("type") == "regressed"

    # a better one: improved, exit 0
    _ship(tmp_path, -1.0)
    code, out, err = cli(*check)
    assert code == 0, err
    data = json.loads(reports[1].read_text())
    row = next(r for r in data["rows"] if r["method"] == "global" and r["task"] == "overall")
    assert row["verdict"] == "improved" and data["counts"]["regressed"] == 0
    assert "#### Improvements" in reports[0].read_text()
    assert ET.parse(reports[2]).getroot().find(".//testcase[@name='global · overall']/failure") is None

    # a removed policy: missing, exit 0; with --strict, exit 1
    shutil.rmtree(tmp_path / "policies" / "analytic" / "global-n3")
    code, out, err = cli(*check)
    assert code == 0, err
    data = json.loads(reports[1].read_text())
    assert {r["verdict"] for r in data["rows"] if r["method"] == "global"} == {"missing"}
    assert "#### Missing committed rows" in reports[0].read_text()
    assert ET.parse(reports[2]).getroot().find(".//testcase[@name='global · overall']/skipped") is not None
    code, out, err = cli(*check, "--strict")
    assert code == 1
    # no committed leaderboard to check against: refused, exit 2
    code, out, err = cli(*check[: check.index("--leaderboards")], "--leaderboards", tmp_path / "none", "--no-progress", "--check")
    assert code == 2 and "committed leaderboard" in err and len(err.strip().splitlines()) == 1
    assert ET.parse(reports[2]).getroot().find(".//testcase[@name='global · overall']/failure").get("type") == "missing"


def test_compare_report_refusals_exit_2(cli, tmp_path):
    code, out, err = cli("compare", "--check", "--report", tmp_path / "r.txt", "--leaderboards", tmp_path, "--no-progress")
    assert code == 2 and "suffix" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("compare", "--report", tmp_path / "r.md", "--no-progress")
    assert code == 2 and "--check" in err


def test_documented_workflow_and_ci_script_run_the_same_check(cli):
    """The GitHub Actions example (docs/ci.md) parses, publishes the Markdown report as the job summary,
    uploads the reports and figures, and runs the very command `.ci/run` runs, with real options."""
    import re
    from pathlib import Path

    from docs_text import workflow_example

    yaml = pytest.importorskip("yaml")
    root = Path(__file__).resolve().parent.parent
    workflow = yaml.safe_load(workflow_example())
    steps = next(iter(workflow["jobs"].values()))["steps"]
    runs = [" ".join(s.get("run", "").split()) for s in steps]
    check = next(r for r in runs if r.startswith("jsbench compare --check"))
    assert any("python -m pytest" in r for r in runs) and any("pip install" in r for r in runs)
    assert any(r.startswith("cat ci/regression.md >> \"$GITHUB_STEP_SUMMARY\"") for r in runs)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "ci/"
    ci_run = (root / ".ci" / "run").read_text()
    assert f"{check} || status=$?" in ci_run and "head -n 1 ci/regression.md" in ci_run
    code, out, err = cli("compare", "--help")
    assert code == 0
    for option in re.findall(r"--[a-z-]+", check):
        assert option in out, option
    assert {"--report", "--strict", "--check"} <= set(re.findall(r"--[a-z-]+", out))


def test_scores_drawn_with_shared_seeds_are_refused():
    lines, scores = _committed(KEY, _run(BASE))
    for entry in scores.values():
        del entry["noise"]  # a scores file written before noise per (prompt, image)
    with pytest.raises(CheckError, match="shared by every prompt.*regenerate"):
        check_against_committed(lines, scores, {KEY: _run(BASE)}, TwoTasks(), KEY[0], KEY[1], [3])


def test_a_committed_value_on_a_rounding_boundary_is_reproduced():
    """The check recomputes a committed value from the per-image scores; summed in another order it can land
    just past a rounding boundary (seen in CI on the OCR rloo row) and is still the CSV's value."""
    from jsbench.report.regression_check import reproduces_csv_value

    assert reproduces_csv_value(0.7578125000000016, 0.757812) and reproduces_csv_value(0.7578124999999984, 0.757813)
    assert reproduces_csv_value(0.5, 0.5) and reproduces_csv_value(None, None) and reproduces_csv_value(float("nan"), None)
    assert not reproduces_csv_value(0.757814, 0.757812)  # two last digits apart: another value
    assert not reproduces_csv_value(0.5, None) and not reproduces_csv_value(None, 0.5)

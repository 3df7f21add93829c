"""Noise per (prompt, image) and learned rows of several training seeds (issue 24, items 1 and 3)."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.report.compare import run_compare, shipped_policies
from jsbench.report.compare_request import CompareRequest, compare_command, read_recipe
from jsbench.evaluation.evaluate import NOISE_SEED_RANGE, encode_rows, evaluate, noise_seed, resolve_schedule
from jsbench.evaluation.results import paired_metrics, run_metrics
from jsbench.suites import load_suite
from jsbench.train.reinforce import TrainConfig, Trainer


def test_noise_seed_is_per_prompt_and_image_and_never_a_training_seed():
    a = [noise_seed("two red circles", k) for k in range(4)]
    b = [noise_seed("a blue square", k) for k in range(4)]
    assert a == [noise_seed("two red circles", k) for k in range(4)]  # deterministic
    assert len(set(a + b)) == 8  # no two (prompt, image) share a noise
    lo, hi = NOISE_SEED_RANGE
    assert all(lo <= s < hi for s in a + b) and lo > 1_000_000 + 10**9  # far above training's 1e6 + it * B + b


def test_evaluation_draws_each_prompts_own_noise():
    bb = load_backbone("analytic")
    items = load_suite("geneval", bb).items("test")[:2]
    _, x = encode_rows(bb, [(items[0], 0), (items[1], 0), (items[0], 0)])
    assert not torch.equal(x[0], x[1]) and torch.equal(x[0], x[2])


def _train_row(root, seeds, rises):
    """A learned global row of three training seeds, trained for two updates each, in the multi-seed layout;
    each run's held-out curve is then replaced by a 21-point one still rising by `rises[s]` per quarter of
    training (seed 1's with ±0.06 wander on top, too noisy to judge it rising alone), and its manifest
    re-stamped from it (jsbench.policy.convergence.restamp)."""
    from jsbench.policy.convergence import restamp

    for seed, rise in zip(seeds, rises):
        cfg = TrainConfig(steps=3, iters=2, contexts=4, samples=2, baseline="rloo", policy="global", lr=0.3, checkpoint_every=2, seed=seed)
        out = root / "analytic" / "global-n3" / f"seed{seed}"
        trainer = Trainer(cfg, out)
        trainer.train(progress=False)
        trainer.save_policy()
        curve = [(20 * i, 0.5 + rise / 5 * i + (0.06 * (-1) ** i if seed == 1 else 0)) for i in range(21)]
        (out / "heldout.jsonl").write_text("".join(json.dumps({"iteration": k, "score": v}) + "\n" for k, v in curve))
        restamp(out / "manifest.json")


@pytest.fixture(scope="module")
def row(tmp_path_factory):
    root = tmp_path_factory.mktemp("policies")
    _train_row(root, [0, 1, 2], [0.1, 0.05, 0.1])  # each seed's verdict: rising, not judged rising, rising; the row: rising
    return root


def _request(row, tmp_path, **kw):
    return CompareRequest(steps=(3,), policies=row, records=tmp_path / "r.jsonl", leaderboards=tmp_path / "lb", seeds=2, zoo="none",
                          plots=False, progress=False, **kw)


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_multi_seed_row_is_the_mean_over_seeds_with_a_two_level_se(row, tmp_path):
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    [seeds] = shipped_policies(row, "analytic", 3)
    assert [p.name for p in seeds] == ["seed0", "seed1", "seed2"]
    result = run_compare(_request(row, tmp_path, seed_base=7), bb, suite, log=lambda m: None)
    rows = {r["method"]: r for r in result.tables[0].rows}
    learned = rows["global"]
    assert learned["train_seeds"] == 3 and learned["converged"] is False and rows["default"]["train_seeds"] is None
    # by hand: each seed's own evaluation on the same images (seed base 7), then the mean over seeds
    default = evaluate(bb, suite, resolve_schedule("default", bb, 3), 2, seed_base=7, progress=False)
    per_seed = [evaluate(bb, suite, resolve_schedule(f"policy:{p}", bb, 3), 2, seed_base=7, progress=False) for p in seeds]
    values = [run_metrics(suite, r)[("overall", "correct")].value for r in per_seed]
    deltas = [paired_metrics(suite, r, default)[("overall", "correct")][0] for r in per_seed]
    assert learned["overall"] == pytest.approx(sum(values) / 3)
    assert learned["delta"] == pytest.approx(sum(deltas) / 3)
    m = sum(deltas) / 3
    assert learned["delta_stderr"] ** 2 >= sum((d - m) ** 2 for d in deltas) / 2 / 3 - 1e-12  # the seed level is counted
    lines = list(csv.DictReader(open(tmp_path / "lb" / "geneval.csv")))
    overall = {r["method"]: r for r in lines if r["task"] == "overall"}
    assert overall["global"]["train_seeds"] == "3" and overall["global"]["converged"] == "false" and overall["global"]["seed_base"] == "7"
    # its SE's df is the Satterthwaite df of the prompt and seed terms: between the seeds' S - 1 = 2 and 2 + the prompts'
    from jsbench.stats import t_interval

    g = overall["global"]
    assert 2 <= learned["df"] <= 2 + learned["counts"]["overall"][0] and float(g["df"]) == pytest.approx(learned["df"], abs=1e-6)
    assert (float(g["ci_low"]), float(g["ci_high"])) == pytest.approx(t_interval(learned["overall"], learned["stderr"], learned["df"]), abs=1e-6)
    assert (float(g["delta_ci_low"]), float(g["delta_ci_high"])) == pytest.approx(
        t_interval(learned["delta"], learned["delta_stderr"], learned["delta_df"]), abs=1e-6)
    assert overall["default"]["df"] and not overall["default"]["delta_df"]  # every row's value has its df; default has no Δ
    # a kept section (read back from the CSV) keeps its training seeds, convergence and seed base
    from jsbench.report.leaderboard import read_committed, render_csv, render_markdown, tables_from_csv

    text = (tmp_path / "lb" / "geneval.csv").read_text()
    assert render_csv(tables_from_csv(read_committed(tmp_path / "lb" / "geneval.csv"))) == text
    md = (tmp_path / "lb" / "geneval.md").read_text()
    assert "| global † | 3 | 3 |" in md and "† not converged" in md and "SE² = SE_prompt² + var_seeds / S" in md
    assert f"{float(g['value']):.3f} ± {float(g['stderr']):.3f} [{float(g['ci_low']):.3f}, {float(g['ci_high']):.3f}]" in md
    assert "[lo, hi]: 95 % interval, Student t" in md
    assert "sha256(p, 7 + k)" in md
    assert "--seed-base 7" in compare_command(CompareRequest(steps=(3,), seed_base=7))  # the command each section shows
    # the committed per-image scores are the mean over seeds: the check pairs a fresh run with them exactly
    check = run_compare(_request(row, tmp_path, seed_base=7, check=True), bb, suite, log=lambda m: None)
    assert check.check.exit_code == 0 and all(r.delta == 0 for r in check.check.rows if r.method == "global")
    # a leaderboard committed before the df and interval columns is still read and checked
    from jsbench.report.leaderboard import CI_FIELDS

    with open(tmp_path / "lb" / "geneval.csv", newline="") as f:
        old_rows = list(csv.DictReader(f))
    old_fields = [c for c in old_rows[0] if c not in CI_FIELDS]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, old_fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(old_rows)
    (tmp_path / "lb" / "geneval.csv").write_text(buf.getvalue())
    older = run_compare(_request(row, tmp_path, seed_base=7, check=True), bb, suite, log=lambda m: None)
    assert older.check.exit_code == 0 and [(r.method, r.task, r.verdict) for r in older.check.rows] == [
        (r.method, r.task, r.verdict) for r in check.check.rows]
    kept = tables_from_csv(read_committed(tmp_path / "lb" / "geneval.csv"))
    assert "[lo, hi]" not in render_markdown(kept, "geneval", "correct", "jsbench compare")  # no df: no interval claimed
    # another seed base is other images: the check refuses to pair them
    from jsbench.report.regression_check import CheckError

    with pytest.raises(CheckError, match="seeds"):
        run_compare(_request(row, tmp_path, seed_base=0, check=True), bb, suite, log=lambda m: None)


def test_policies_list_shows_every_training_seed(row, cli):
    code, out, err = cli("policies", "list", "--root", row, "--format", "csv")
    assert code == 0, err
    listed = list(csv.DictReader(out.splitlines()))
    assert [r["path"].rsplit("/", 1)[-1] for r in listed] == ["seed0", "seed1", "seed2"]
    assert [r["train_seed"] for r in listed] == ["0", "1", "2"] and [r["converged"] for r in listed] == ["False", "True", "False"]
    code, out, err = cli("policies", "list", "--root", row)
    assert code == 0 and "seed0 †" in out and "seed1 †" not in out and "not converged" in out


def test_eval_records_its_seed_base(cli, tmp_path):
    code, out, err = cli("eval", "--steps", "3", "--seeds", "2", "--seed-base", "11", "--out", tmp_path / "r.jsonl", "--no-progress", "--format", "json")
    assert code == 0, err
    recs = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert {r["seed_base"] for r in recs} == {11} and {tuple(r["seeds"]) for r in recs} == {(11, 12)}
    assert {r["noise"] for r in recs} == {"prompt-image-sha256"} and all(math.isfinite(r["stderr"]) for r in recs if r["task"] == "overall")


def test_recipe_takes_a_seed_base(tmp_path):
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps({"runs": [{"suite": "geneval", "backbone": "analytic", "steps": [3], "seed_base": 100}]}))
    assert read_recipe(path)[0].seed_base == 100
    path.write_text(json.dumps({"runs": [{"suite": "geneval", "backbone": "analytic", "steps": [3]}]}))
    assert read_recipe(path)[0].seed_base == 0


def test_eval_of_a_multi_seed_row_folder_names_its_seeds(row, cli):
    code, out, err = cli("eval", "--steps", "3", "--schedule", f"policy:{row / 'analytic' / 'global-n3'}", "--no-progress")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "3 training seeds (seed0, seed1, seed2)" in err and "jsbench compare" in err

"""The SE calibration benchmark: the spread over replicate images against the image part of the reported
SE, and the spread over disjoint groups of training seeds against its seed part."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from jsbench.evaluation.evaluate import EvalRun
from jsbench import JsbenchError
from jsbench.analysis.se_calibration import seed_term_summary, summarise_differences
from jsbench.suites.base import EvalItem, aggregate_by_task


class _Suite:
    name = "toy"
    primary_metric = "correct"

    def aggregate(self, scores, items):
        return aggregate_by_task(scores, items)


ITEMS = [EvalItem("p0", "t"), EvalItem("p1", "t")]


def _run(values, base):
    return EvalRun(items=ITEMS, seeds=[base, base + 1], scores=[{"correct": float(v)} for v in values])


def test_spread_mean_se_and_ratio_by_hand():
    # replicate 1: a - b per image = [1, 1, 0, 0] (p0: 1, 1; p1: 0, 0): Δ 0.5, clustered SE 0.5 (see test_stats)
    # replicate 2: a - b = [0, 0, 0, 0]: Δ 0, SE 0. spread = SD(0.5, 0) = 0.353553; mean SE 0.25; ratio 1.414
    reps = [(0, {"a": _run([1, 1, 0, 0], 0), "b": _run([0, 0, 0, 0], 0)}), (2, {"a": _run([1, 0, 1, 0], 2), "b": _run([1, 0, 1, 0], 2)})]
    [d] = summarise_differences(reps, _Suite(), pairs=[("a", "b")])
    assert [r["delta"] for r in d["replicates"]] == [0.5, 0.0] and [r["se"] for r in d["replicates"]] == pytest.approx([0.5, 0.0])
    assert d["spread"] == pytest.approx(math.sqrt(0.125)) and d["mean_se"] == pytest.approx(0.25)
    # rows of one seed: the whole SE is the image part
    assert d["mean_image_se"] == pytest.approx(0.25) and d["ratio"] == pytest.approx(math.sqrt(0.125) / 0.25) and d["ok"] is False
    assert d["train_seeds"] == [1, 1]
    # chi-square interval over R - 1 = 1 df: ratio * sqrt(1 / chi2_{0.975,1}) .. ratio * sqrt(1 / chi2_{0.025,1})
    assert d["ratio_ci"] == pytest.approx([d["ratio"] * (1 / 5.023886) ** 0.5, d["ratio"] * (1 / 0.000982069) ** 0.5], rel=1e-5)


def test_the_image_ratio_divides_by_the_image_part_only():
    """Rows of two training seeds whose seeds disagree: the printed SE adds their spread, the image part
    does not, and the replicate spread is compared with the image part (else it is below 1 by design)."""
    def seeded(per_seed, base):
        runs = [_run(v, base) for v in per_seed]
        mean = [{"correct": sum(r.scores[i]["correct"] for r in runs) / len(runs)} for i in range(4)]
        return EvalRun(items=ITEMS, seeds=[base, base + 1], scores=mean, seed_scores=[r.scores for r in runs])

    reps = [(0, {"a": seeded([[1, 1, 1, 1], [0, 0, 1, 0]], 0), "b": seeded([[0, 0, 0, 0], [0, 0, 0, 0]], 0)}),
            (2, {"a": seeded([[1, 0, 1, 1], [0, 0, 0, 0]], 2), "b": seeded([[0, 0, 0, 0], [0, 0, 0, 0]], 2)})]
    [d] = summarise_differences(reps, _Suite(), pairs=[("a", "b")])
    assert all(r["se"] > r["image_se"] > 0 for r in d["replicates"])
    assert d["ratio"] == pytest.approx(d["spread"] / d["mean_image_se"])


def test_seed_term_by_hand():
    # per-seed differences 0, .2 | .1, .1 | .4, .2: group Δ .1, .1, .3 (spread SD = 0.11547); within-group
    # variances .02, 0, .02 -> seed parts sqrt(v / 2) = .1, 0, .1, RMS sqrt((.01 + 0 + .01) / 3) = 0.08165
    s = seed_term_summary([0.5, 0.7, 0.6, 0.6, 0.9, 0.7], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5], group_size=2)
    assert (s["seeds"], s["groups"], s["group_size"]) == (6, 3, 2)
    assert s["group_delta"] == pytest.approx([0.1, 0.1, 0.3]) and s["group_seed_se"] == pytest.approx([0.1, 0.0, 0.1])
    assert s["spread"] == pytest.approx(0.1154701) and s["rms_seed_se"] == pytest.approx(0.0816497)
    assert s["ratio"] == pytest.approx(0.1154701 / 0.0816497) and s["ratio_ci_rule"] == "F(2, 3)"
    # F(2, 3): 0.975 quantile 16.04411, 0.025 quantile 0.02553
    assert s["ratio_ci"] == pytest.approx([s["ratio"] / 16.04411**0.5, s["ratio"] / 0.0255298**0.5], rel=1e-4)
    assert s["covers_1"] is True


def test_seed_term_spread_matches_its_printed_part_when_seeds_are_independent():
    """Simulated rows whose per-seed values are independent draws: over many calibrations the ratio's F
    interval covers 1 about 95 % of the time, and when the groups' Δ spread is inflated (a shared seed
    effect the per-group SE cannot see) it stops covering 1."""
    import random

    rng = random.Random(7)
    covered = 0
    for _ in range(400):
        a = [0.6 + rng.gauss(0, 0.02) for _ in range(24)]
        b = [0.5 + rng.gauss(0, 0.02) for _ in range(24)]
        covered += seed_term_summary(a, b, 3)["covers_1"]
    assert 0.91 <= covered / 400 <= 0.99
    a = [0.6 + 0.1 * (i // 3) + rng.gauss(0, 0.005) for i in range(24)]  # each group of 3 shares an offset
    assert not seed_term_summary(a, [0.5] * 24, 3)["covers_1"]


def test_seed_term_refuses_what_it_cannot_measure():
    with pytest.raises(JsbenchError, match="pairs seed s with seed s"):
        seed_term_summary([0.1] * 6, [0.1] * 5, 2)
    with pytest.raises(JsbenchError, match="at least 2 groups"):
        seed_term_summary([0.1] * 3, [0.1] * 3, 3)


def test_every_pair_of_rows_by_default():
    reps = [(0, {"x": _run([1, 1, 0, 0], 0), "y": _run([0, 0, 0, 0], 0), "z": _run([1, 0, 0, 0], 0)})]
    assert [(d["a"], d["b"]) for d in summarise_differences(reps, _Suite())] == [("y", "x"), ("z", "x"), ("z", "y")]


@pytest.mark.slow  # evaluates the analytic world twice
def test_script_writes_the_calibration_json(tmp_path):
    from jsbench.backbones import load_backbone
    from jsbench.policy.schedule_policy import make_policy

    policy = make_policy(load_backbone("analytic"), 3, "global")
    with torch.no_grad():
        policy.delta.copy_(torch.tensor([1.0, 0.0, -1.0]))
    policy.save(tmp_path / "policies" / "analytic" / "global-n3", {"backbone": "analytic", "baseline": "rloo", "reward": "geneval"})
    spec = importlib.util.spec_from_file_location("bench_se_calibration", Path(__file__).resolve().parents[1] / "scripts" / "bench_se_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "se.json"
    mod.main(["--part", "image", "--run", "analytic:3", "--seeds", "1", "--replicates", "2", "--policies", str(tmp_path / "policies"), "--out", str(out)])
    data = json.loads(out.read_text())
    [run] = data["runs"]
    assert data["schema"] == "jsbench.se_calibration/2" and data["target_ratio"] == 1.3 and "seed_term" not in data
    assert run["seed_bases"] == [0, 1] and run["rows"] == {"default": 1, "global": 1}
    [d] = run["differences"]
    assert (d["a"], d["b"]) == ("global", "default") and len(d["replicates"]) == 2 and d["mean_se"] > 0
    assert d["ratio"] == pytest.approx(d["spread"] / d["mean_image_se"]) and run["pooled_ratio"] == pytest.approx(d["ratio"])
    assert run["ratio_relative_error"] == pytest.approx(1 / 2**0.5)


@pytest.mark.slow  # trains 2 x 4 tiny runs on the analytic world
def test_script_trains_the_missing_seeds_alike_and_writes_the_seed_term(tmp_path, capsys):
    from jsbench.train.reinforce import TrainConfig, Trainer

    for row, kind, heldout in (("rloo-n3", "instance", 2), ("global-n3", "global", 0)):
        t = Trainer(TrainConfig(steps=3, iters=2, contexts=4, samples=2, baseline="rloo", policy=kind, heldout_prompts=heldout),
                    tmp_path / "policies" / "analytic" / row / "seed0")
        t.train(progress=False)
        t.save_policy()
    spec = importlib.util.spec_from_file_location("bench_se_calibration", Path(__file__).resolve().parents[1] / "scripts" / "bench_se_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "se.json"
    mod.main(["--part", "seed", "--train-seeds", "4", "--group-size", "2", "--seeds", "1", "--policies", str(tmp_path / "policies"),
              "--seed-runs", str(tmp_path / "extra"), "--out", str(out)])
    data = json.loads(out.read_text())
    st = data["seed_term"]
    assert data["runs"] == [] and (st["a"], st["b"], st["seeds"], st["groups"]) == ("rloo-n3", "global-n3", 4, 2)
    trained = sorted(p.relative_to(tmp_path / "extra").as_posix() for p in (tmp_path / "extra").glob("*/*/seed*/manifest.json"))
    assert trained == [f"analytic/{r}/seed{s}/manifest.json" for r in ("global-n3", "rloo-n3") for s in (1, 2, 3)]
    m = json.loads((tmp_path / "extra" / "analytic" / "rloo-n3" / "seed3" / "manifest.json").read_text())
    assert m["train"]["seed"] == 3 and m["train"]["iters"] == 2 and m["train"]["baseline"] == "rloo"
    assert len(st["a_per_seed"]) == 4 and st["per_seed_delta"] == pytest.approx([x - y for x, y in zip(st["a_per_seed"], st["b_per_seed"])])

    # run again: the seeds already trained alike are kept; after the shipped row is retrained at another update
    # count, its extra seeds are trained again at that count, not read as seeds of the new row
    kept = tmp_path / "extra" / "analytic" / "global-n3" / "seed1" / "policy.safetensors"
    before = kept.stat().st_mtime_ns
    mod.main(["--part", "seed", "--train-seeds", "4", "--group-size", "2", "--seeds", "1", "--policies", str(tmp_path / "policies"),
              "--seed-runs", str(tmp_path / "extra"), "--out", str(out)])
    assert kept.stat().st_mtime_ns == before
    shutil.rmtree(tmp_path / "policies" / "analytic" / "rloo-n3" / "seed0")
    t = Trainer(TrainConfig(steps=3, iters=3, contexts=4, samples=2, baseline="rloo", policy="instance", heldout_prompts=2),
                tmp_path / "policies" / "analytic" / "rloo-n3" / "seed0")
    t.train(progress=False)
    t.save_policy()
    mod.main(["--part", "seed", "--train-seeds", "4", "--group-size", "2", "--seeds", "1", "--policies", str(tmp_path / "policies"),
              "--seed-runs", str(tmp_path / "extra"), "--out", str(out)])
    assert "trained with other settings" in capsys.readouterr().out
    for seed in (1, 2, 3):
        folder = tmp_path / "extra" / "analytic" / "rloo-n3" / f"seed{seed}"
        assert json.loads((folder / "manifest.json").read_text())["train"]["iters"] == 3
        points = [json.loads(line)["iteration"] for line in (folder / "heldout.jsonl").read_text().splitlines()]
        assert points == sorted(set(points)) and points[0] == 0  # the stale run's held-out curve is gone, not kept under it
    assert kept.stat().st_mtime_ns == before  # the other row's seeds still match theirs

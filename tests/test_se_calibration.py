"""The SE calibration benchmark: spread over replicates against the reported SE (issue 24, item 6)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from jsbench.evaluate import EvalRun
from jsbench.se_calibration import summarise_differences
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
    assert d["ratio"] == pytest.approx(math.sqrt(0.125) / 0.25) and d["ok"] is False
    assert d["train_seeds"] == [1, 1]


def test_every_pair_of_rows_by_default():
    reps = [(0, {"x": _run([1, 1, 0, 0], 0), "y": _run([0, 0, 0, 0], 0), "z": _run([1, 0, 0, 0], 0)})]
    assert [(d["a"], d["b"]) for d in summarise_differences(reps, _Suite())] == [("y", "x"), ("z", "x"), ("z", "y")]


@pytest.mark.slow  # evaluates the analytic world twice
def test_script_writes_the_calibration_json(tmp_path):
    from jsbench.backbones import load_backbone
    from jsbench.policy import make_policy

    policy = make_policy(load_backbone("analytic"), 3, "global")
    with torch.no_grad():
        policy.delta.copy_(torch.tensor([1.0, 0.0, -1.0]))
    policy.save(tmp_path / "policies" / "analytic" / "global-n3", {"backbone": "analytic", "baseline": "rloo", "reward": "geneval"})
    spec = importlib.util.spec_from_file_location("bench_se_calibration", Path(__file__).resolve().parents[1] / "scripts" / "bench_se_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "se.json"
    mod.main(["--run", "analytic:3", "--seeds", "1", "--replicates", "2", "--policies", str(tmp_path / "policies"), "--out", str(out)])
    data = json.loads(out.read_text())
    [run] = data["runs"]
    assert data["schema"] == "jsbench.se_calibration/1" and data["target_ratio"] == 1.3
    assert run["seed_bases"] == [0, 1] and run["rows"] == {"default": 1, "global": 1}
    [d] = run["differences"]
    assert (d["a"], d["b"]) == ("global", "default") and len(d["replicates"]) == 2 and d["mean_se"] > 0
    assert d["ratio"] == pytest.approx(d["spread"] / d["mean_se"]) and run["pooled_ratio"] == pytest.approx(d["ratio"])
    assert run["ratio_relative_error"] == pytest.approx(1 / 2**0.5)

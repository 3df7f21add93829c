"""The benchmark scripts run end to end on tiny settings and write their JSON (and plots), so they do not rot.

They run in this process (the embedded world is built once per process), with their run caches and
outputs in a temporary folder.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", SCRIPTS / f"bench_{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # builds the analytic world's trainer for the gradient-variance part
def test_bench_baselines(tmp_path, capsys):
    out = tmp_path / "baselines.json"
    mod = _script("baselines")
    common = ["--reps", "200", "--ratios", "0", "10", "--B", "3", "64", "--K", "2", "--bandit-reps", "500", "--bandit-B", "4",
              "--bandit-K", "2", "--bandit-level-sd", "3", "--grad-batches", "3", "--grad-K", "2", "--grad-B", "4"]
    mod.main(common + ["--out", str(out)])
    data = json.loads(out.read_text())
    assert len(data["mse_grid"]) == 8 and {r["rewards"] for r in data["mse_grid"]} == {"gaussian", "binary"}
    assert (tmp_path / "baselines_mse.png").stat().st_size > 0 and (tmp_path / "baselines_mse_binary.png").stat().st_size > 0
    for r in data["mse_grid"]:
        if r["B"] == 3:  # js is exactly RLOO at B = 3
            assert r["mse"]["js"] == r["mse"]["rloo"]
    big = next(r for r in data["mse_grid"] if r["B"] == 64 and r["ratio"] == 10 and r["rewards"] == "gaussian")
    assert big["mse"]["js"] < big["mse"]["xctx"]  # many contexts that differ a lot: js follows rloo, not xctx
    assert set(data["claims"]) == {"js", "js-plugin"} and data["claims"]["js"]["points"] == 4
    b = data["bandit_gradient_error"][0]
    assert b["over_rloo"]["rloo"] == 1.0 and set(b["over_rloo"]) == {"none", "rloo", "xctx", "js", "js-plugin", "jspo"}
    g = data["gradient_variance"][0]
    assert set(g["total_variance"]) == {"none", "rloo", "xctx", "js", "js-plugin", "jspo"} and g["variance_over_rloo"]["rloo"] == 1.0
    assert "claim 'MSE(js) <= MSE(rloo) within 3 paired standard errors" in capsys.readouterr().out
    # without --write or --out nothing is written
    before = sorted(p.name for p in tmp_path.iterdir())
    mod.main(common[:8] + ["--bandit-reps", "0", "--grad-batches", "0"])
    assert "nothing written" in capsys.readouterr().out and sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.slow
def test_bench_sample_efficiency(tmp_path, monkeypatch, capsys):
    mod = _script("sample_efficiency")
    monkeypatch.setattr(mod, "CACHE", tmp_path / "cache")
    out = tmp_path / "se.json"
    args = ["--iters", "4", "--K", "2", "4", "--seeds", "0", "1", "--contexts", "4", "--window", "2", "--eval-seeds", "1", "--baselines", "rloo", "js",
            "--out", str(out)]
    mod.main(args)
    data = json.loads(out.read_text())
    assert [s["K"] for s in data["summaries"]] == [2, 4] and all(s["B"] == 4 for s in data["summaries"])
    s = data["summaries"][0]
    assert set(s["baselines"]) == {"rloo", "js"} and set(s["paired_vs_reference"]) == {"js"}
    js = s["paired_vs_reference"]["js"]
    scored = s["baselines"]["js"]["seeds"]
    assert set(js["auc"]["seeds"]) <= set(scored) and js["auc"]["verdict"] in ("above", "below", "not resolved")
    assert "js_over_rloo" not in json.dumps(data) and "updates_to_rloo_final" not in json.dumps(data)  # no first-crossing ratio
    assert (tmp_path / "se.png").stat().st_size > 0
    assert "js − rloo  AUC" in capsys.readouterr().out
    # a second run reuses the cached runs
    assert len(list((tmp_path / "cache").glob("*.json"))) == 8


def test_sample_efficiency_flags_collapsed_runs_and_pairs_by_seed():
    from jsbench.analysis.sample_efficiency import collapsed, paired_difference, reward_auc

    assert collapsed([0.6, 0.6, 0.1, 0.05], window=2) and not collapsed([0.4, 0.5, 0.6, 0.6], window=2)
    assert collapsed([0.5, float("nan")], window=1) and reward_auc([0.2, 0.4]) == pytest.approx(0.3)
    p = paired_difference({0: 0.5, 1: 0.6, 2: 0.7}, {0: 0.4, 1: 0.4, 2: 0.5, 3: 0.9})  # seed 3 has no partner
    assert p["seeds"] == [0, 1, 2] and p["per_seed"] == pytest.approx([0.1, 0.2, 0.2])
    assert p["mean"] == pytest.approx(0.5 / 3) and p["se"] == pytest.approx((1 / 300) ** 0.5 / 3**0.5)
    assert p["verdict"] == "above" and p["ci95"][0] > 0  # every seed's difference is positive


def test_bench_budgets(tmp_path, monkeypatch):
    mod = _script("budgets")
    monkeypatch.setattr(mod, "CACHE", tmp_path / "cache")
    out = tmp_path / "budgets.json"
    mod.main(["--steps", "3", "--iters", "2", "--seeds", "1", "--out", str(out)])
    data = json.loads(out.read_text())
    row = data["rows"][0]
    assert row["steps"] == 3 and {"default", "global", "js"} <= set(row) and data["ceiling"]["steps"] == 200
    assert row["js"]["origin"] == row["global"]["origin"] == "trained here"
    assert row["js"]["train"]["iters"] == row["global"]["train"]["iters"] == 2


@pytest.mark.slow
def test_bench_cost(tmp_path):
    out = tmp_path / "cost.json"
    _script("cost").main(["--steps", "3", "--batches", "8", "--naive-batch", "8", "--repeats", "1", "--suite-seeds", "1", "--no-scale", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["machine"]["logical_cpus"] and data["analytic"][0]["per_row_over_shared_median"] > 0
    assert {s["suite"] for s in data["suites"]} >= {"geneval"}


@pytest.mark.slow  # a tiny diffusers pipeline, timed
def test_bench_backbones(tmp_path, capsys):
    out = tmp_path / "backbones.json"
    assert _script("backbones").main(["--kinds", "sdxl", "--batch", "2", "--steps", "2", "--repeats", "1", "--no-flops",
                                      "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["tiny"]
    assert row["backbone"] == "sdxl" and len(row["per_row_over_shared_all"]) == 2  # the pair, both orders
    assert row["per_row_over_shared_median"] > 0 and row["naive_over_per_row"] > 0 and row["tiny_policy_over_sampler"] > 0
    assert "per/shared" in capsys.readouterr().out


@pytest.mark.slow  # jsbench subprocesses, from this checkout and from a snapshot of HEAD
def test_bench_throughput_times_this_checkout_against_a_snapshot(tmp_path, monkeypatch, capsys):
    import dataclasses

    from jsbench.analysis import throughput

    tiny = dataclasses.replace(throughput.WORLDS["analytic"], iters=2)
    monkeypatch.setitem(throughput.WORLDS, "analytic", tiny)
    out = tmp_path / "throughput.json"
    assert _script("throughput").main(["--base", "HEAD", "--worlds", "analytic", "--repeats", "2", "--no-eval",
                                       "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    train = data["worlds"]["analytic"]["train"]
    assert data["base"] == "HEAD" and set(train) == {data["new"], "HEAD", "settings", "speedup"}
    assert train["HEAD"]["seconds_per_update"]["n"] == train[data["new"]]["seconds_per_update"]["n"] == 2
    assert train["speedup"]["n"] == 2 and train["speedup"]["min"] <= train["speedup"]["median"] <= train["speedup"]["max"]
    assert "--iters 2" in train["settings"] and "eval" not in data["worlds"]["analytic"]
    # the sides alternate: the second repeat runs the snapshot first
    lines = [ln for ln in capsys.readouterr().out.splitlines() if " train " in ln and "repeat" in ln]
    assert [("HEAD " in ln.split("train", 1)[1]) for ln in lines] == [False, True, True, False]


@pytest.mark.slow  # a jsbench eval subprocess
def test_bench_throughput_counts_each_image_once(tmp_path):
    from jsbench.analysis import throughput

    side = throughput.Side("here", Path(__file__).resolve().parents[1])
    world = throughput.World("analytic", (), ("--suite", "geneval", "--backbone", "analytic"), iters=1, limits=(1, 1), seeds=2)
    images, seconds = throughput.time_eval(side, world, 1, tmp_path)
    assert images == 6 * 2 and seconds > 0  # GenEval's six tasks, one prompt each, two images: not once per record


@pytest.mark.slow  # two small jsbench compare subprocesses
def test_bench_main_command_times_both_sides_and_writes_nothing_into_the_checkout(tmp_path):
    import subprocess

    from jsbench.analysis import throughput

    root = Path(__file__).resolve().parents[1]
    status = lambda: subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout  # noqa: E731
    before = status()
    sides = [throughput.Side("new", root), throughput.Side("old", root)]
    small = ("compare", "--steps", "3", "--seeds", "1", "--limit", "1", "--zoo", "none", "--no-plots", "--policies", str(tmp_path / "none"))
    logged = []
    entry = throughput.measure_main(sides, 2, small, log=logged.append)
    assert status() == before  # leaderboards and records went to a scratch folder
    assert entry["command"] == "jsbench " + " ".join(small)
    assert entry["new"]["images"] == entry["old"]["images"] == [2 * 6]  # default and ceiling, six tasks, one image each
    for label in ("new", "old"):
        assert entry[label]["wall_seconds"]["n"] == 2 and entry[label]["cpu_seconds"]["median"] > 0
    assert entry["speedup"]["wall"]["n"] == 2 and entry["speedup"]["cpu"]["min"] > 0
    assert [("old " in ln) for ln in logged] == [False, True, True, False]  # alternating, the order flipped


def test_bench_main_command_refuses_an_unknown_base(capsys):
    assert _script("main_command").main(["--base", "no-such-commit"]) == 2
    assert "no commit 'no-such-commit'" in capsys.readouterr().err


def test_bench_throughput_refuses_an_unknown_base(capsys):
    assert _script("throughput").main(["--base", "no-such-commit", "--worlds", "analytic"]) == 2
    assert "no commit 'no-such-commit'" in capsys.readouterr().err

"""The shipped policies are what HEAD trains: every run records the one command that repeats it, trained alike
within its backbone, and its convergence verdict follows from its own held-out curve."""

import json
import shlex
from pathlib import Path

import pytest

from jsbench.policy.convergence import HELDOUT_FILE, run_convergence
from jsbench.train.reinforce import read_log
from jsbench.train.config import TrainConfig, train_command
from train_policies_stand_in import script_calls

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = sorted((ROOT / "policies").glob("*/*/seed*/manifest.json"))


def _manifest(path: Path) -> dict:
    return json.loads(path.read_text())


# the training seeds of each world's rows (scripts/train_policies.sh): 8 where a run is cheap enough
SEEDS = {("analytic", "geneval"): 8, ("detail", "geneval"): 8, ("scenes-dit", "geneval"): 8, ("analytic", "ocr"): 8}


def test_every_learned_row_has_its_worlds_training_seeds():
    rows = {}
    for m in MANIFESTS:
        rows.setdefault(m.parent.parent, []).append(m.parent.name)
    assert rows, "no shipped policies"
    for row, seeds in rows.items():
        t = _manifest(row / "seed0" / "manifest.json")["train"]
        assert sorted(seeds, key=lambda s: int(s[4:])) == [f"seed{s}" for s in range(SEEDS[t["backbone"], t["suite"]])], row
    # nothing left in the old flat layout beside the seed folders
    assert not list((ROOT / "policies").glob("*/*/manifest.json"))


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: "/".join(p.parent.parts[-3:]))
def test_each_run_records_its_repeating_command(path):
    m = _manifest(path)
    rel = path.parent.relative_to(ROOT).as_posix()
    config = TrainConfig(**m["train"])
    assert m["command"] == train_command(config, rel)
    argv = shlex.split(m["command"])
    assert argv[:2] == ["jsbench", "train"] and argv[argv.index("--out") + 1] == rel
    assert argv[argv.index("--seed") + 1] == path.parent.name[len("seed"):] == str(config.seed)
    assert m["threads"] == 1 and argv[argv.index("--threads") + 1] == "1"  # float sums repeat only at one count


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: "/".join(p.parent.parts[-3:]))
def test_convergence_follows_from_the_runs_own_log(path):
    """The manifest's verdict is jsbench.policy.convergence's on the run's own heldout.jsonl (re-stamp it with
    `python -m jsbench.policy.convergence restamp policies/` after a change of rule). A run trained before held-out
    curves has none: nothing to check it against, its verdict is whatever its manifest recorded then, and its
    learned row is not judged on the leaderboards."""
    m = _manifest(path)
    if not (path.parent / HELDOUT_FILE).is_file():
        pytest.skip(f"no {HELDOUT_FILE}: trained before held-out curves, so its row is not judged")
    assert len(read_log(path.parent / "train_log.jsonl")) == m["train"]["iters"]
    assert m["convergence"] == run_convergence(path.parent)


def test_rows_of_a_budget_are_trained_alike(tmp_path):
    """Same updates, contexts and samples for every row of a backbone, suite and step budget: rows compare as
    methods within a budget (a leaderboard section), not across. Each budget's count is the one
    scripts/train_policies.sh gives it, asked of the script itself with a stand-in `jsbench` that records its
    command instead of training (tests/train_policies_stand_in.py)."""
    by_budget = {}
    for m in map(_manifest, MANIFESTS):
        t = m["train"]
        by_budget.setdefault((m["backbone"], t["suite"], t["steps"]), set()).add((t["iters"], t["contexts"], t["samples"]))
    assert by_budget and all(len(v) == 1 for v in by_budget.values()), by_budget
    for (backbone, suite, steps), ((iters, contexts, samples),) in by_budget.items():
        [argv] = script_calls(tmp_path, f"{backbone}-{suite}-{steps}", backbone, OUT=str(tmp_path / "out"), SUITE=suite,
                              STEPS=str(steps), SEEDS="0", POLICIES="global")
        assert [argv[argv.index(f"--{k}") + 1] for k in ("iters", "contexts", "samples")] == \
            [str(iters), str(contexts), str(samples)], (backbone, suite, steps)


@pytest.mark.slow
def test_a_shipped_run_repeats_its_log(tmp_path, monkeypatch):
    """detail/js-n3/seed1, re-run by its own command for its first 6 updates, logs the same run.

    What the images decide repeats exactly on any machine: each update's rewards, their spread and the
    baseline's shrinkage. The policy's float32 loss and gradient norm repeat exactly only where MKL takes
    the same kernels: it picks them by CPU (on an AVX-512 Intel CPU the loss differs from the shipped log's
    in its 5th significant digit, ~1e-6 absolute, and the gradient norm by ~1e-7 relative), so those two are
    held to float32 sums' own precision. A change to the method moves them by far more."""
    from typer.testing import CliRunner

    from jsbench.cli import app

    path = ROOT / "policies" / "detail" / "js-n3" / "seed1"
    argv = shlex.split(_manifest(path / "manifest.json")["command"])[2:]
    argv[argv.index("--iters") + 1] = "6"
    argv[argv.index("--out") + 1] = str(tmp_path / "run")
    result = CliRunner().invoke(app, ["train", *argv, "--no-progress"])
    assert result.exit_code == 0, result.output

    fresh = read_log(tmp_path / "run" / "train_log.jsonl")
    shipped = read_log(path / "train_log.jsonl")[:6]
    assert len(fresh) == len(shipped) == 6
    for new, old in zip(fresh, shipped):
        assert set(new) == set(old)
        exact = {k: v for k, v in old.items() if k not in ("seconds", "loss", "grad_norm")}
        assert {k: new[k] for k in exact} == exact, new["iteration"]
        assert new["loss"] == pytest.approx(old["loss"], rel=0, abs=1e-5), new["iteration"]
        assert new["grad_norm"] == pytest.approx(old["grad_norm"], rel=1e-5), new["iteration"]

"""scripts/train_policies.sh, the script that trains the shipped rows: with RESUME=1 an interrupted run goes on from
its checkpoint to the files an uninterrupted run writes, and a finished run of the asked update count is kept."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jsbench.policy.convergence import VERDICT_WORDS
from train_policies_stand_in import run_script, script_calls

pytestmark = pytest.mark.slow  # four short training runs, each its own process

RUN = "global-n3/seed0"


def _script(out: Path, iters: int, resume: bool = False) -> str:
    env = {"OUT": str(out), "STEPS": "3", "SEEDS": "0", "POLICIES": "global", "ITERS": str(iters)}
    done = run_script("analytic", {**env, "RESUME": "1"} if resume else env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _log_without_seconds(folder: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (folder / "train_log.jsonl").read_text().splitlines() if line.strip()]


def test_resume_goes_on_from_a_checkpoint_and_keeps_a_finished_run(tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    _script(whole, iters=6)
    # the same 6-update run interrupted after its checkpoint at update 4 (checkpoints every 2 updates here, a setting
    # the manifest's command does not record), its folder as the interruption leaves it: checkpoint and all
    interrupted = f"""
import sys
from jsbench.train.reinforce import TrainConfig, Trainer

class Stop(Exception):
    pass

def stop_after_the_fifth(record):
    if record["iteration"] == 4:
        raise Stop

config = TrainConfig(backbone="analytic", steps=3, baseline="js", reward="geneval", suite="geneval", policy="global",
                     iters=6, contexts=16, samples=4, seed=0, threads=1, checkpoint_every=2)
try:
    Trainer(config, sys.argv[1]).train(progress=False, on_update=stop_after_the_fifth)
except Stop:
    sys.exit(0)
sys.exit(1)
"""
    subprocess.run([sys.executable, "-c", interrupted, str(cut / RUN)], check=True, capture_output=True, timeout=600,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert (cut / RUN / "checkpoint.pt").is_file() and not (cut / RUN / "manifest.json").exists()
    done_before = (cut / RUN / "train_log.jsonl").read_text().splitlines()[:4]  # with their own seconds

    out = _script(cut, iters=6, resume=True)
    assert (cut / RUN / "train_log.jsonl").read_text().splitlines()[:4] == done_before  # not trained again
    assert "kept" not in out
    assert not (cut / RUN / "checkpoint.pt").exists()  # removed once the run is finished, as after a fresh one
    assert (cut / RUN / "policy.safetensors").read_bytes() == (whole / RUN / "policy.safetensors").read_bytes()
    assert _log_without_seconds(cut / RUN) == _log_without_seconds(whole / RUN)
    resumed, fresh = (json.loads((d / RUN / "manifest.json").read_text()) for d in (cut, whole))
    assert resumed["command"] == fresh["command"].replace(str(whole), str(cut)) and resumed["convergence"] == fresh["convergence"]
    # the run's line names its verdict in convergence.py's words
    assert f"== {cut / RUN} {VERDICT_WORDS[resumed['convergence']['converged']]}" in out

    before = (cut / RUN / "train_log.jsonl").read_bytes()
    assert "kept (finished, 6 updates)" in _script(cut, iters=6, resume=True)  # nothing retrained
    assert (cut / RUN / "train_log.jsonl").read_bytes() == before
    _script(cut, iters=5, resume=True)  # another count: trained again from the start
    assert len(_log_without_seconds(cut / RUN)) == 5


def _train_directly(folder: Path, iters: int) -> None:
    """A run of `iters` updates whose checkpoint is still there, as an interruption after its last save leaves it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "jsbench", "train", "--backbone", "analytic", "--reward", "geneval", "--suite", "geneval",
                    "--iters", str(iters), "--contexts", "16", "--samples", "4", "--seed", "0", "--threads", "1", "--no-progress",
                    "--steps", "3", "--baseline", "js", "--policy", "global", "--out", str(folder)],
                   check=True, capture_output=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.parametrize("trained", [6, 2])
def test_resume_starts_again_from_a_checkpoint_of_another_count(tmp_path, trained):
    """Past the count, going on would ship a 6-update policy under a 4-update command; short of it, the held-out
    points (every count/20 updates) would not be the ones the 4-update run scores."""
    _train_directly(tmp_path / RUN, iters=trained)
    assert (tmp_path / RUN / "checkpoint.pt").is_file()
    # mark the run's first logged update: going on from the checkpoint keeps that line, training again rewrites it
    # (its seconds alone may repeat to their 4 decimals)
    log = tmp_path / RUN / "train_log.jsonl"
    first, *rest = log.read_text().splitlines()
    log.write_text("\n".join([json.dumps({**json.loads(first), "marked": True}), *rest]) + "\n")
    _script(tmp_path, iters=4, resume=True)
    assert "marked" not in json.loads(log.read_text().splitlines()[0])  # trained again, not gone on from
    assert len(_log_without_seconds(tmp_path / RUN)) == 4
    assert json.loads((tmp_path / RUN / "manifest.json").read_text())["train"]["iters"] == 4


def test_a_checkpoint_that_does_not_load_is_kept_and_its_run_fails(tmp_path):
    (tmp_path / RUN).mkdir(parents=True)
    (tmp_path / RUN / "checkpoint.pt").write_bytes(b"not a checkpoint")
    done = run_script("analytic", {"OUT": str(tmp_path), "STEPS": "3", "SEEDS": "0", "POLICIES": "global", "ITERS": "4",
                                   "RESUME": "1"})
    assert done.returncode != 0 and "does not load" in done.stderr
    assert (tmp_path / RUN / "checkpoint.pt").read_bytes() == b"not a checkpoint" and not (tmp_path / RUN / "train_log.jsonl").exists()


def test_a_failed_or_interrupted_run_keeps_its_checkpoint_and_fails_the_script(tmp_path):
    """Ctrl-C makes `jsbench train` exit 130 with its checkpoint saved: the script must neither delete that
    checkpoint (as it does after a finished run) nor report success."""
    stand_in = tmp_path / "bin" / "jsbench"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/usr/bin/env bash\nwhile [ "$1" != --out ]; do shift; done\n'
                        'mkdir -p "$2" && echo saved > "$2/checkpoint.pt"\nexit 130\n')
    stand_in.chmod(0o755)
    done = run_script("analytic", {"OUT": str(tmp_path / "out"), "STEPS": "3", "SEEDS": "0 1", "POLICIES": "global",
                                   "ITERS": "6"}, first_on_path=stand_in.parent)
    assert done.returncode != 0 and "FAILED or interrupted" in done.stderr
    for seed in (0, 1):  # the other run still ran
        assert (tmp_path / "out" / f"global-n3/seed{seed}" / "checkpoint.pt").read_text() == "saved\n"


def test_update_counts_are_per_budget_for_ocr_and_per_backbone_else(tmp_path):
    """SUITE=ocr trains each step budget at its own count, the same for every row of it (ITERS overrides both),
    RESUME=1 keeps a finished run of its budget's count, and GenEval keeps the backbone's count except where a
    budget of the backbone has its own (analytic at 3 steps); a stand-in
    `jsbench` records the commands instead of training (its manifest names the run's update count)."""
    def iters_by_run(name: str, backbone: str = "analytic", **extra: str) -> dict[str, str]:
        out = tmp_path / extra.pop("OUT_NAME", f"out-{name}")
        env = {"OUT": str(out), "SUITE": "ocr", "STEPS": "3 5", "SEEDS": "0 1", "POLICIES": "global js", **extra}
        return {Path(argv[argv.index("--out") + 1]).relative_to(out).as_posix(): argv[argv.index("--iters") + 1]
                for argv in script_calls(tmp_path, name, backbone, **env)}

    by_run = iters_by_run("ocr")
    assert by_run == {
        f"ocr-{name}-n{steps}/seed{seed}": {3: "600", 5: "300"}[steps]
        for name in ("global", "js") for steps in (3, 5) for seed in (0, 1)}
    assert iters_by_run("resumed", RESUME="1", OUT_NAME="out-ocr") == {}  # every run finished at its count: kept
    assert set(iters_by_run("override", ITERS="7").values()) == {"7"}
    assert iters_by_run("geneval", SUITE="geneval", STEPS="3 5", SEEDS="0", POLICIES="global") == {
        "global-n3/seed0": "2400", "global-n5/seed0": "400"}
    assert iters_by_run("detail", SUITE="geneval", STEPS="3", SEEDS="0", POLICIES="global", backbone="detail") == {
        "global-n3/seed0": "2000"}

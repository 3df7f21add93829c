"""Real faults, not mocks: a SIGKILLed training run, a kill in the middle of writes, an eval killed part-way."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from jsbench.evaluation.evaluate import evaluate, resolve_schedule
from jsbench.io import append_lines
from jsbench.evaluation.results import read_records

TRAIN = ["--steps", "3", "--iters", "8", "-B", "4", "-K", "2", "--seed", "5", "--checkpoint-every", "1", "--no-progress"]


def _jsbench(*args, cwd):
    return subprocess.Popen([sys.executable, "-m", "jsbench", *map(str, args)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _log(path):
    return [{k: v for k, v in json.loads(l).items() if k != "seconds"} for l in Path(path).read_text().splitlines()]


@pytest.mark.slow
def test_sigkilled_training_resumes_to_the_same_policy_and_log(tmp_path):
    full = _jsbench("train", "--out", tmp_path / "full", *TRAIN, cwd=tmp_path)
    assert full.wait(timeout=600) == 0, full.stderr.read()
    victim = _jsbench("train", "--out", tmp_path / "killed", *TRAIN, cwd=tmp_path)
    log = tmp_path / "killed" / "train_log.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:  # kill it somewhere after the third update
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert not (tmp_path / "killed" / "policy.safetensors").exists()
    resumed = _jsbench("train", "--out", tmp_path / "killed", *TRAIN, "--resume", cwd=tmp_path)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()
    a, b = load_file(tmp_path / "full" / "policy.safetensors"), load_file(tmp_path / "killed" / "policy.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _log(tmp_path / "full" / "train_log.jsonl") == _log(log)


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_kill_during_an_atomic_write_leaves_the_previous_version(tmp_path):
    """A child process rewrites a manifest in a loop and is SIGKILLed mid-way: the file is always either
    the old or a new complete version, never a torn one."""
    target = tmp_path / "manifest.json"
    from jsbench.io import write_json_atomic

    write_json_atomic(target, {"version": 0, "payload": "x" * 200_000})
    code = (
        "import sys; from jsbench.io import write_json_atomic\n"
        "i = 1\n"
        "while True:\n"
        "    write_json_atomic(sys.argv[1], {'version': i, 'payload': 'y' * 200_000}); i += 1\n"
    )
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", code, str(target)])
        time.sleep(1.5)
        child.send_signal(signal.SIGKILL)
        child.wait()
        data = json.loads(target.read_text())  # must parse: never half-written
        assert len(data["payload"]) == 200_000


@pytest.mark.slow  # subprocesses
def test_concurrent_record_appends_never_interleave(tmp_path):
    path = tmp_path / "records.jsonl"
    code = (
        "import sys, json; from pathlib import Path; from jsbench.io import append_lines\n"
        "for i in range(200):\n"
        "    append_lines(Path(sys.argv[1]), [json.dumps({'w': sys.argv[2], 'i': i, 'pad': 'z' * 5000}) + '\\n' for _ in range(3)])\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(w)]) for w in range(3)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 * 200 * 3
    assert all(json.loads(line)["pad"] == "z" * 5000 for line in lines)


def test_eval_killed_part_way_skips_finished_items_and_ends_the_same(tmp_path):
    from jsbench.backbones import load_backbone
    from jsbench.suites import load_suite

    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    items = suite.items("test")[:12]
    source = resolve_schedule("default", bb, 3)
    clean = evaluate(bb, suite, source, 2, items=items, progress=False)

    class Killed(Exception):
        pass

    calls = {"n": 0}
    real_score = suite.score

    def dies_on_second_batch(images, its):
        calls["n"] += 1
        if calls["n"] == 2:
            raise Killed
        return real_score(images, its)

    out = tmp_path / "records.jsonl"
    suite.score = dies_on_second_batch
    with pytest.raises(Killed):
        evaluate(bb, suite, source, 2, items=items, progress=False, out=out, batch_size=8)
    partial = list(tmp_path.glob(".records.jsonl.*.partial.jsonl"))
    assert len(partial) == 1 and len(partial[0].read_text().splitlines()) == 8
    # the rerun scores only what is missing and ends with the uninterrupted run's scores
    seen = []
    suite.score = lambda images, its: seen.append(len(its)) or real_score(images, its)
    resumed = evaluate(bb, suite, source, 2, items=items, progress=False, out=out, batch_size=8)
    assert sum(seen) == len(items) * 2 - 8
    assert resumed.scores == clean.scores

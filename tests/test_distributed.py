"""Multi-process training and evaluation: two CPU processes on gloo give the numbers one process gives.

- The equivalence test forks two processes with torch.multiprocessing (they inherit the parent's
  already-built embedded world, so they start in a second), joins them through Accelerate on gloo at
  MASTER_ADDR=127.0.0.1 and a free port, trains and evaluates there, and compares with the same runs
  in this process.
- The command-line test runs `jsbench train|eval --processes 2` (torchrun underneath) end to end on the
  text suite, whose world is cheap to build in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import jsbench.distributed as jd
from jsbench.distributed import DistContext, DistributedError, shard_range, strip_option

TRAIN = dict(steps=3, contexts=4, samples=2, iters=4, baseline="js", checkpoint_every=2, seed=3)
EVAL_SEEDS = 2


# ------------------------------------------------------------------------------------------ one process


def test_shards_cover_every_item_once():
    for n in range(0, 12):
        for w in range(1, 5):
            blocks = [shard_range(n, r, w) for r in range(w)]
            assert [i for lo, hi in blocks for i in range(lo, hi)] == list(range(n))
            assert max(hi - lo for lo, hi in blocks) - min(hi - lo for lo, hi in blocks) <= 1
            strided = [DistContext(rank=r, world_size=w).shard_indices(n) for r in range(w)]
            assert sorted(i for s in strided for i in s) == list(range(n))


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_one_process_is_plain_and_needs_no_accelerate():
    """WORLD_SIZE unset: identity collectives, and Accelerate is never imported."""
    code = (
        "import sys, torch; sys.modules['accelerate'] = None\n"  # importing it would fail
        "from jsbench.distributed import get_context\n"
        "c = get_context(); t = torch.arange(6.).view(3, 2)\n"
        "assert c.world_size == 1 and c.is_main and not c.distributed\n"
        "assert c.gather_rows(t) is t and c.gather_object(7) == [7] and c.sum_scalar(2.5) == 2.5\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_multi_process_without_accelerate_is_one_clear_line(monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "accelerate", None)
    monkeypatch.setattr(jd, "_CONTEXT", None)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(DistributedError, match=r"WORLD_SIZE=2.*needs Hugging Face Accelerate.*pip install"):
        jd.get_context()
    monkeypatch.delenv("WORLD_SIZE")
    code, out, err = cli("eval", "--processes", "2", "--steps", "3")
    assert code != 0 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--processes 2 needs Hugging Face Accelerate" in lines[0], err


@pytest.mark.parametrize("args, says", [(("--suite", "genevil"), "unknown suite 'genevil'"),
                                         (("--suite", "ocr", "--backbone", "detail"), "ocr"),
                                         (("--limit", "0"), "--limit")])
def test_eval_refuses_bad_input_before_processes_start(monkeypatch, cli, args, says):
    """`eval --processes N` checks its input in the launching process: a typo costs no launch of N processes."""
    monkeypatch.setattr(jd, "launch_processes", lambda n: pytest.fail("launched processes for a run that is refused"))
    code, out, err = cli("eval", "--processes", "2", "--steps", "3", *args)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and says in lines[0], err


def test_strip_option():
    assert strip_option(["eval", "--processes", "2", "--steps", "3"], "--processes") == ["eval", "--steps", "3"]
    assert strip_option(["eval", "--processes=4", "--seeds", "1"], "--processes") == ["eval", "--seeds", "1"]


_CRASH = """
import os, sys, time
if os.environ["RANK"] == "1":
    raise RuntimeError("rank one broke")
time.sleep(60)  # rank 0 is still working when torchrun stops it
"""


def _launch_script(tmp_path, monkeypatch, source: str, *script_args: str, argv=("eval",)) -> int:
    """`launch_processes(2, argv)` with torchrun's two children running the Python `source` (with
    `script_args`) in place of jsbench: how the launcher reads what children print and how they end."""
    pytest.importorskip("accelerate", reason="--processes needs accelerate (the `scale` and `test` extras)")
    script = tmp_path / "child.py"
    script.write_text(source)
    real = jd.torchrun_command
    monkeypatch.setattr(jd, "torchrun_command", lambda n, args, port=None: [*real(n, [], port)[:-2], str(script), *script_args])
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return jd.launch_processes(2, list(argv))


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_a_crashed_process_is_named_with_its_traceback_not_torchruns_banner(tmp_path, monkeypatch, capsys):
    """torchrun's banner calls the lowest rank the root cause when two failures share a second, which
    can be the process torchrun itself stopped; the launcher names every failed process and keeps the
    crashed one's traceback."""
    code = _launch_script(tmp_path, monkeypatch, _CRASH)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1
    assert "RuntimeError: rank one broke" in err
    assert "ChildFailedError" not in err and "FAILED" not in err and "closing signal" not in err  # torchrun's own report is summed up in one line
    assert lines[-1].startswith("error: 2-process run failed: process 0 was stopped by SIGTERM"), lines[-1]
    assert lines[-1].endswith("process 1 exited with 1"), lines[-1]


_REFUSE_ON_ONE = """
import os, sys, time, traceback
flag = sys.argv[1]
if os.environ["RANK"] == "1":  # a collective that lost its peer: a traceback, printed before rank 0 refuses
    try:
        raise RuntimeError("Connection closed by peer")
    except RuntimeError:
        traceback.print_exc()
    print("error: internal error (a bug in jsbench; please report it with the traceback above)", file=sys.stderr)
    sys.stderr.flush()
    open(flag, "w").close()
    time.sleep(60)
while not os.path.exists(flag):
    time.sleep(0.05)
print("error: rank zero refuses", file=sys.stderr)
sys.exit(2)
"""


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_a_refusal_on_one_process_stays_its_one_line(tmp_path, monkeypatch, capsys):
    assert _launch_script(tmp_path, monkeypatch, _REFUSE_ON_ONE, str(tmp_path / "flag")) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert lines == ["error: rank zero refuses"]


# ------------------------------------------------------------------------------------- two processes


def _strip(log):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in log]


def _record_values(records):
    """Records without what legitimately differs between two runs (creation time)."""
    drop = ("created",)
    return [{k: v for k, v in (r.__dict__ if hasattr(r, "__dict__") else r).items() if k not in drop} for r in records]


def _worker(rank: int, world: int, port: int, out: str, policy_dir: str) -> None:
    """One of the two forked processes: join the group, train, evaluate, and let rank 0 write."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    jd._CONTEXT = None  # the parent's one-process context is not ours
    from jsbench.evaluation.evaluate import evaluate_sharded, resolve_schedule
    from jsbench.evaluation.results import make_records
    from jsbench.suites import load_suite
    from jsbench.train.reinforce import TrainConfig, Trainer, read_log

    ctx = jd.get_context()
    assert ctx.world_size == world and ctx.rank == rank and ctx.backend == "gloo"
    # the collectives themselves, with uneven shards (3 rows on rank 0, 1 on rank 1)
    rows = torch.full((3 if rank == 0 else 1, 2), float(rank), dtype=torch.float64)
    assert ctx.gather_rows(rows).tolist() == [[0.0, 0.0]] * 3 + [[1.0, 1.0]]

    out = Path(out)
    trainer = Trainer(TrainConfig(**TRAIN), out / "train", dist=ctx)
    trainer.train(progress=False)
    trainer.save_policy()
    suite = load_suite("geneval", trainer.backbone)
    source = resolve_schedule(f"policy:{policy_dir}", trainer.backbone, 3)
    run = evaluate_sharded(trainer.backbone, suite, source, ctx, seeds_per_prompt=EVAL_SEEDS, progress=False)
    if ctx.is_main:
        (out / "records.json").write_text(json.dumps(_record_values(make_records(trainer.backbone, suite, source, run))))
        (out / "scores.json").write_text(json.dumps(run.scores))
        assert len(read_log(out / "train" / "train_log.jsonl")) == TRAIN["iters"]  # written once
    ctx.barrier()


def test_two_gloo_processes_train_and_evaluate_like_one(tmp_path):
    pytest.importorskip("accelerate", reason="multi-process runs need accelerate (the `scale` and `test` extras)")
    import torch.multiprocessing as mp
    from safetensors.torch import load_file

    from jsbench.evaluation.evaluate import evaluate, resolve_schedule
    from jsbench.evaluation.results import make_records
    from jsbench.suites import load_suite
    from jsbench.train.reinforce import TrainConfig, Trainer, read_log

    # one process (this one): the reference, and the policy both evaluations use
    one = Trainer(TrainConfig(**TRAIN), tmp_path / "one", dist=DistContext())
    one.train(progress=False)
    policy_dir = one.save_policy()
    suite = load_suite("geneval", one.backbone)
    source = resolve_schedule(f"policy:{policy_dir}", one.backbone, 3)
    run = evaluate(one.backbone, suite, source, EVAL_SEEDS, progress=False)
    ref_records = _record_values(make_records(one.backbone, suite, source, run))

    # two processes, forked from this one, on gloo
    two = tmp_path / "two"
    mp.start_processes(_worker, args=(2, jd.free_port(), str(two), str(policy_dir)), nprocs=2, join=True, start_method="fork")

    a, b = _strip(read_log(tmp_path / "one" / "train_log.jsonl")), _strip(read_log(two / "train" / "train_log.jsonl"))
    for r1, r2 in zip(a, b, strict=True):  # same samples, same rewards, same global-batch shrinkage
        for key in ("iteration", "reward", "reward_std", "shrinkage"):
            assert r1[key] == r2[key], (key, r1, r2)
        assert r1["loss"] == pytest.approx(r2["loss"], rel=1e-5, abs=1e-7)
        assert r1["grad_norm"] == pytest.approx(r2["grad_norm"], rel=1e-5, abs=1e-7)
    p1, p2 = load_file(str(policy_dir / "policy.safetensors")), load_file(str(two / "train" / "policy.safetensors"))
    assert p1.keys() == p2.keys()
    for k in p1:  # sums of per-process gradients differ from the one-process sum only by rounding
        torch.testing.assert_close(p1[k], p2[k], rtol=1e-5, atol=1e-6)
    assert not (two / "train" / "checkpoint.pt.tmp").exists()

    assert json.loads((two / "scores.json").read_text()) == run.scores  # per image, in the suite's order
    got = json.loads((two / "records.json").read_text())
    assert got == json.loads(json.dumps(ref_records))


def _cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "jsbench", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow  # two torchrun processes, each building the world
def test_cli_processes_2_end_to_end(tmp_path):
    """`jsbench train|eval --processes 2` through torchrun, on the text suite (cheap in fresh processes)."""
    pytest.importorskip("accelerate", reason="multi-process runs need accelerate (the `scale` and `test` extras)")
    pytest.importorskip("rapidocr_onnxruntime", reason="the text suite reads images with rapidocr (the `ocr` extra)")
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    train = ["train", "--suite", "ocr", "--reward", "ocr", "--steps", "3", "-B", "4", "-K", "2", "--iters", "2", "--seed", "1", "--no-progress",
             "--heldout", "8"]  # a small held-out set: its OCR reads are half of a run, and the launcher is what is tested
    one = _cli(*train, "--out", tmp_path / "t1", env=env)
    two = _cli(*train, "--out", tmp_path / "t2", "--processes", "2", env=env)
    assert one.returncode == 0 and two.returncode == 0, f"one process:\n{one.stderr}\ntwo processes:\n{two.stderr}"  # whole, not cut
    assert two.stdout.count("policy written to") == 1  # rank 0 reports, and writes, once
    logs = [_strip([json.loads(ln) for ln in (tmp_path / d / "train_log.jsonl").read_text().splitlines()]) for d in ("t1", "t2")]
    assert [(r["reward"], r["shrinkage"]) for r in logs[0]] == [(r["reward"], r["shrinkage"]) for r in logs[1]]

    ev = ["eval", "--suite", "ocr", "--steps", "3", "--seeds", "1", "--no-progress"]
    one = _cli(*ev, "--out", tmp_path / "r1.jsonl", env=env)
    two = _cli(*ev, "--out", tmp_path / "r2.jsonl", "--processes", "2", env=env)
    assert one.returncode == 0 and two.returncode == 0, f"one process:\n{one.stderr}\ntwo processes:\n{two.stderr}"  # whole, not cut
    recs = [[json.loads(ln) for ln in (tmp_path / f).read_text().splitlines()] for f in ("r1.jsonl", "r2.jsonl")]
    assert _record_values(recs[0]) == _record_values(recs[1])
    assert not list(tmp_path.glob(".r2.jsonl.*.partial.jsonl"))  # side files cleaned once, by rank 0

    # a bad suite under --processes 2: one line, printed once, by the launching process before it starts any other
    bad = _cli("eval", "--suite", "genevil", "--processes", "2", "--out", tmp_path / "r3.jsonl", env=env)
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode != 0 and len(lines) == 1 and "unknown suite 'genevil'" in lines[0], bad.stderr


_SLOW_PROGRESS = """
import os, sys, time
if os.environ["RANK"] == "0":
    print("progress: 1 of 2 rows", file=sys.stderr, flush=True)
time.sleep(1.5)
"""


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_the_childrens_progress_is_shown_as_it_comes(tmp_path, monkeypatch):
    """A long sharded run is not silent until it ends: a child's stderr line reaches the user at once."""
    import io
    import time

    seen = []

    class Clock(io.StringIO):
        def write(self, text):
            seen.append((time.monotonic(), text))
            return super().write(text)

    monkeypatch.setattr(jd.sys, "stderr", Clock())
    assert _launch_script(tmp_path, monkeypatch, _SLOW_PROGRESS) == 0
    ended = time.monotonic()
    shown = [t for t, text in seen if "progress: 1 of 2 rows" in text]
    assert len(shown) == 1 and ended - shown[0] > 1.0  # shown while the children still ran
    assert not any("*****" in text or "torch.distributed" in text for _, text in seen)


_REGRESSED_ON_MAIN = """
import os, sys, time
if os.environ["RANK"] == "0":
    print("check failed: 1 row regressed")
    sys.exit(1)
time.sleep(float(sys.argv[1]))  # still running when the main exits: torchrun stops it with SIGTERM
"""


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_exit_1_of_the_main_process_is_its_verdict_not_a_crash(tmp_path, monkeypatch, capsys):
    """`compare --check --processes N`: a regression exits 1 with the check's own report, not a crash line."""
    for linger in ("0", "5"):  # the other process gone already, or stopped by torchrun after the main's exit
        assert _launch_script(tmp_path, monkeypatch, _REGRESSED_ON_MAIN, linger, argv=("compare", "--check")) == 1
        captured = capsys.readouterr()
        assert "error:" not in captured.err and "ChildFailedError" not in captured.err, captured.err


@pytest.mark.slow  # two recipe runs, once in one process and once in two
def test_compare_all_processes_2_runs_every_recipe_run_in_one_group(tmp_path):
    """`compare --all --processes 2`: the processes keep their group from one recipe run to the next (the
    second run once found it torn down) and write what one process writes."""
    pytest.importorskip("accelerate", reason="multi-process runs need accelerate (the `scale` and `test` extras)")
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    recipe = {"runs": [{"suite": "geneval", "backbone": "analytic", "steps": [s], "seeds": 1, "zoo": "none"} for s in (3, 5)]}
    pages = []
    for name, extra in (("one", []), ("two", ["--processes", "2"])):
        board = tmp_path / name
        board.mkdir()
        (board / "recipe.json").write_text(json.dumps(recipe))
        done = _cli("compare", "--all", *extra, "--leaderboards", board, "--policies", tmp_path / "none", "--records",
                    tmp_path / f"{name}.jsonl", "--no-plots", "--no-progress", env=env)
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("jsbench compare --suite geneval --backbone analytic --steps 5") == 1  # printed once
        pages.append((board / "geneval.csv").read_text())
    assert pages[0] == pages[1] and "analytic,jsbench/analytic-scenes,5,default" in pages[0]


_INTERNAL_ERROR = """
import sys, traceback
try:
    raise KeyError("a bug")
except KeyError:
    traceback.print_exc()
print("error: internal error (a bug in jsbench; please report it with the traceback above)", file=sys.stderr)
sys.exit(3)
"""


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_an_internal_error_keeps_its_traceback_and_exit_code(tmp_path, monkeypatch, capsys):
    """`error: internal error` names the traceback above it: the launcher shows it and keeps exit 3."""
    assert _launch_script(tmp_path, monkeypatch, _INTERNAL_ERROR) == 3
    err = capsys.readouterr().err
    assert "KeyError: 'a bug'" in err and "internal error" in err


def test_a_held_context_leaves_its_group_once_at_the_end(monkeypatch):
    """`held()`: the close() of each command inside keeps the group; the block's end leaves it, once."""
    left = []
    monkeypatch.setattr(jd, "_destroy", lambda: left.append("left"))
    ctx = jd.DistContext(rank=0, world_size=2)
    monkeypatch.setattr(ctx, "barrier", lambda: None)
    with ctx.held():
        ctx.close()
        ctx.close()
        assert left == []
    assert left == ["left"]
    ctx.close()  # outside any block: leaves at once
    assert left == ["left", "left"]

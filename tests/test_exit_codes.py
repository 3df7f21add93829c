"""Exit codes a CI can trust: 0 ok, 1 only "regressed", 2 a refusal (one line, before any work), 3 a bug,
130 interrupted; outputs checked up front, written whole or not at all; progress lines in logs."""

import contextlib
import errno
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from jsbench import JsbenchError

REPO = Path(__file__).resolve().parents[1]


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("out, says", [
    ("adir", "is a folder"),
    ("afile/records.jsonl", "afile is a file, not a folder"),
    ("/dev/full", "not a regular file"),
    ("/proc/jsbench-test/records.jsonl", "cannot create a file in /proc"),
])
def test_eval_refuses_an_unwritable_out_before_any_work(cli, tmp_path, out, says, monkeypatch):
    import jsbench.backbones as backbones

    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    monkeypatch.setattr(backbones, "load_backbone", lambda *a, **k: pytest.fail("loaded a backbone before refusing"))
    code, out_, err = cli("eval", "--steps", "3", "--seeds", "1", "--no-progress", "--out", out)
    assert code == 2 and says in _one_line(err) and out_ == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]  # nothing written


def test_train_schedules_and_compare_refuse_unwritable_outputs(cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    for args in (["train", "--out", "afile/run", "--iters", "1"],
                 ["schedules", "plot", "--out", "afile/figs"],
                 ["compare", "--check", "--report", "afile/check.md", "--leaderboards", str(REPO / "leaderboards")],
                 ["compare", "--records", "/dev/full", "--leaderboards", "lb"]):
        code, _, err = cli(*args)
        assert code == 2 and "afile is a file, not a folder" in _one_line(err) or "/dev/full" in err, (args, err)
    assert [p.name for p in tmp_path.iterdir()] == ["afile"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without a usable CUDA device")
def test_device_cuda_without_cuda_is_one_line(cli):
    for command in (["eval", "--steps", "3"], ["train", "--out", "run", "--iters", "1"], ["compare", "--leaderboards", "lb"]):
        code, _, err = cli(*command, "--device", "cuda")
        assert code == 2 and "--device cuda" in _one_line(err), (command, err)


def _first_value(text: str) -> str:
    """The `value` field of the first row, as written (the committed numbers change when regenerated)."""
    import csv
    import io

    return next(csv.DictReader(io.StringIO(text)))["value"]


def _damaged(text: str) -> dict[str, str]:
    header, _, body = text.partition("\n")
    return {
        "cut mid-line": text[: len(text) // 2],
        "non-numeric": text.replace(f",{_first_value(text)},", ",n/a,", 1),
        "missing header": body,
        "a short row": header + "\n" + body.partition("\n")[0].rpartition(",")[0].rpartition(",")[0] + "\n" + body.partition("\n")[2],
        "a long row": header + "\n" + body.replace("\n", ",extra\n", 1),
    }


@pytest.mark.parametrize("damage", ["cut mid-line", "non-numeric", "missing header", "a short row", "a long row"])
def test_check_against_a_damaged_leaderboard_is_refused_with_exit_2(cli, tmp_path, damage):
    lb = tmp_path / "lb"
    shutil.copytree(REPO / "leaderboards", lb)
    assert f",{_first_value((lb / 'geneval.csv').read_text())}," in (lb / "geneval.csv").read_text()
    (lb / "geneval.csv").write_text(_damaged((lb / "geneval.csv").read_text())[damage])
    code, _, err = cli("compare", "--check", "--leaderboards", str(lb), "--no-progress", "--no-plots")
    line = _one_line(err)
    assert code == 2 and "geneval.csv:" in line and "regenerate" in line, line


def test_append_cut_short_by_a_full_disk_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    from jsbench.io import append_lines

    path = tmp_path / "records.jsonl"
    path.write_text('{"a": 1}\n')
    real = os.write

    def half_then_full(fd, data):
        if len(data) > 4:
            return real(fd, bytes(data[:4]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(JsbenchError, match="cannot write .*records.jsonl: No space left on device"):
        append_lines(path, ['{"b": 2}\n'])
    assert path.read_text() == '{"a": 1}\n'


def test_a_replacing_write_that_fails_keeps_the_old_file_and_no_temp(tmp_path):
    from jsbench.io import replacing

    path = tmp_path / "table.md"
    path.write_text("old\n")
    with pytest.raises(JsbenchError, match="No space left on device"):
        with replacing(path) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["table.md"]


def test_main_maps_system_errors_to_2_and_bugs_to_3(cli, monkeypatch):
    import jsbench.policy.schedule_policy as policy

    def boom(root):
        raise RuntimeError("a bug")

    monkeypatch.setattr(policy, "list_policies", boom)
    code, _, err = cli("policies", "list")
    assert code == 3 and "RuntimeError: a bug" in err and err.strip().splitlines()[-1].startswith("error: internal error")

    def refused(root):
        raise PermissionError(errno.EACCES, "Permission denied", str(root))

    monkeypatch.setattr(policy, "list_policies", refused)
    code, _, err = cli("policies", "list")
    assert code == 2 and "Permission denied" in _one_line(err)


def test_compare_outside_a_project_writes_here_not_into_the_installed_checkout(tmp_path):
    from jsbench.workspace import project_dir

    assert project_dir("leaderboards", tmp_path) == REPO / "leaderboards"  # read: the committed tables
    assert project_dir("leaderboards", tmp_path, installed=False) == Path("leaderboards")  # written: ./leaderboards
    (tmp_path / "leaderboards").mkdir()
    assert project_dir("leaderboards", tmp_path / "leaderboards", installed=False) == (tmp_path / "leaderboards").resolve()


def test_progress_is_plain_lines_with_count_rate_and_eta_when_stderr_is_a_file(monkeypatch):
    import jsbench.progress as progress

    clock = iter([0.0, 1.0, 2.0, 30.0, 31.0])
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    stream = io.StringIO()
    lines = progress.LineProgress("images", stream)
    task = lines.add_task("[bold]eval geneval · default", total=100)  # t=0
    lines.update(task, advance=10, status="default · 3 steps")  # t=1: the first advance is shown
    lines.update(task, advance=10)  # t=2: within LINE_EVERY_S, not shown
    lines.update(task, advance=30)  # t=30: shown
    lines.update(task, advance=50)  # t=31: done, shown once
    assert stream.getvalue().splitlines() == [
        "eval geneval · default: 10/100 images (10%), 10.0 images/s, ETA 0:00:09  default · 3 steps",
        "eval geneval · default: 50/100 images (50%), 1.7 images/s, ETA 0:00:30  default · 3 steps",
        "eval geneval · default: 100/100 images (100%), 3.2 images/s, done in 0:00:31  default · 3 steps",
    ]


def test_eval_with_stderr_in_a_log_shows_progress_there(cli):
    code, _, err = cli("eval", "--steps", "3", "--seeds", "1", "--out", "r.jsonl")  # captured stderr: not a terminal
    assert code == 0
    assert "images/s" in err and "/72 images" in err and "done in" in err.splitlines()[-1], err


def test_resume_command_swaps_overwrite_for_resume():
    from jsbench.workspace import resume_command

    argv = ["train", "--out", "runs/my run", "--iters", "9", "--overwrite"]
    assert resume_command(argv, True) == "jsbench train --out 'runs/my run' --iters 9 --resume"
    assert resume_command(argv, False) == "jsbench train --out 'runs/my run' --iters 9"


@contextlib.contextmanager
def _interrupted_at(monkeypatch, iteration: int):
    """A block in which update `iteration` of any Trainer is interrupted (Ctrl-C)."""
    from jsbench.train.reinforce import Trainer

    real = Trainer.step

    def step(self, it):
        if it == iteration:
            raise KeyboardInterrupt
        return real(self, it)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "step", step)
        yield


def test_ctrl_c_in_train_exits_130_with_the_resume_command(cli, monkeypatch):
    args = ["train", "--out", "run", "--steps", "3", "--iters", "4", "--contexts", "3", "--samples", "2",
            "--checkpoint-every", "1", "--no-progress"]
    with _interrupted_at(monkeypatch, 2):
        code, _, err = cli(*args)
    assert code == 130
    assert _one_line(err) == "interrupted; resume with: jsbench " + " ".join(args) + " --resume"
    code, _, err = cli(*args, "--resume")
    assert code == 0, err
    assert [r["iteration"] for r in map(json.loads, Path("run/train_log.jsonl").read_text().splitlines())] == [0, 1, 2, 3]


def test_a_restart_before_the_first_checkpoint_starts_a_fresh_log(cli, monkeypatch):
    args = ["train", "--out", "run", "--steps", "3", "--iters", "2", "--contexts", "3", "--samples", "2",
            "--checkpoint-every", "10", "--no-progress"]
    with _interrupted_at(monkeypatch, 1):
        code, _, err = cli(*args)
    assert code == 130 and "no checkpoint yet; start again with: jsbench train" in _one_line(err)
    assert len(Path("run/train_log.jsonl").read_text().splitlines()) == 1  # update 0, from the stopped run
    code, _, err = cli(*args)
    assert code == 0, err
    assert [r["iteration"] for r in map(json.loads, Path("run/train_log.jsonl").read_text().splitlines())] == [0, 1]


def test_compare_refuses_a_damaged_leaderboard_before_evaluating(cli, tmp_path, monkeypatch):
    import jsbench.backbones as backbones

    lb = tmp_path / "lb"
    shutil.copytree(REPO / "leaderboards", lb)
    (lb / "geneval.csv").write_text(_damaged((lb / "geneval.csv").read_text())["non-numeric"])
    monkeypatch.setattr(backbones, "load_backbone", lambda *a, **k: pytest.fail("loaded a backbone before refusing"))
    code, _, err = cli("compare", "--leaderboards", str(lb), "--no-progress", "--no-plots")
    assert code == 2 and "'n/a', not a number" in _one_line(err)


def test_a_closed_stdout_pipe_is_not_exit_1(cli, monkeypatch):
    from jsbench.commands import tables

    def closed(*args, **kwargs):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(tables, "rows_text", closed)
    code, _, _ = cli("policies", "list", "--format", "csv")  # as in `jsbench policies list --format csv | head -1`
    assert code == 141


@pytest.mark.slow
def test_compare_outside_a_project_writes_dot_leaderboards(cli, tmp_path):
    committed = {p: p.stat().st_mtime_ns for p in (REPO / "leaderboards").glob("geneval.*")}
    code, out, err = cli("compare", "--steps", "2", "--seeds", "1", "--zoo", "none", "--no-plots", "--no-progress")
    assert code == 0, err
    assert {p.name for p in (tmp_path / "leaderboards").iterdir()} == {"geneval.md", "geneval.csv", "geneval.scores.jsonl"}
    assert "wrote leaderboards/geneval.md" in out
    assert {p: p.stat().st_mtime_ns for p in committed} == committed  # the installed checkout's are untouched

"""Plugins through entry points (issue 37 item 3).

The example package (examples/jsbench-plugin-example) is built and installed with pip into a temporary
`--target` folder that the jsbench subprocesses get on PYTHONPATH: a real install of the real pyproject (its
entry points come from the built dist-info), yet the running venv is never modified, so nothing is left behind
even when the test is killed half-way, and tests running beside it never see the plugin. A broken plugin is
simulated with a bare `*.dist-info/entry_points.txt` on sys.path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "jsbench-plugin-example"


def _dist_info(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_a_broken_plugin_is_one_line_naming_it_and_its_package(cli, tmp_path, monkeypatch):
    _dist_info(tmp_path, "broken-plugin", "[jsbench.schedules]\nwobbly = broken_plugin_missing.module:WOBBLY\n"
                                          "[jsbench.baselines]\nshaky = broken_plugin_missing:SHAKY\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = cli("eval", "--schedule", "wobbly", "--steps", "3")
    assert code != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "'wobbly'" in err and "broken-plugin 0.1" in err and "ModuleNotFoundError" in err
    code, out, err = cli("plugins")
    assert code == 1 and "did not load (2)" in out and "'shaky'" in out and "Traceback" not in out + err
    code, out, err = cli("train", "--baseline", "shaky", "--iters", "1", "--steps", "3", "--out", tmp_path / "p", "--no-progress")
    assert code != 0 and len(err.strip().splitlines()) == 1 and "'shaky'" in err and "broken-plugin" in err


def test_plugins_help_fits(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli("plugins", "--help")
    assert code == 0 and max(map(len, out.splitlines())) <= 80


@pytest.mark.slow  # a pip build and five jsbench processes (~25 s)
def test_the_example_plugin_installs_and_runs_eval_compare_and_train(tmp_path):
    # the example builds offline with this environment's own build backend (no index to fetch one from);
    # Python 3.12's venv no longer ships setuptools
    pytest.importorskip("setuptools", reason="building the example plugin offline needs setuptools installed")
    site = tmp_path / "site"
    build = tmp_path / "src"
    import shutil

    shutil.copytree(EXAMPLE, build, ignore=shutil.ignore_patterns("build", "*.egg-info"))  # the checkout stays clean
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index",
                          "--target", str(site), str(build)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "OMP_NUM_THREADS": "1", "COLUMNS": "80"}

    def jsbench(*args):
        proc = subprocess.run([sys.executable, "-m", "jsbench", *map(str, args)], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    listing = jsbench("plugins")
    assert "cosine[:S]" in listing and "median-loo" in listing and "jsbench-plugin-example 0.1.0" in listing
    assert "cosine" in jsbench("eval", "--help")  # a plugin is named there unloaded: help stays fast
    jsbench("eval", "--schedule", "cosine", "--steps", "3", "--limit", "1", "--seeds", "1", "--out", tmp_path / "r.jsonl", "--no-progress")
    assert {json.loads(line)["method"] for line in (tmp_path / "r.jsonl").read_text().splitlines()} == {"cosine"}
    jsbench("compare", "--steps", "3", "--seeds", "1", "--limit", "1", "--zoo", "karras,cosine", "--policies", tmp_path / "none",
            "--records", tmp_path / "c.jsonl", "--leaderboards", tmp_path / "lb", "--no-progress")
    board = (tmp_path / "lb" / "geneval.md").read_text()
    assert "| cosine |" in board and board.index("| karras |") < board.index("| cosine |")  # its declared order
    jsbench("train", "--baseline", "median-loo", "--iters", "2", "--steps", "3", "--contexts", "4", "--samples", "3",
            "--out", tmp_path / "pol", "--no-progress")
    assert json.loads((tmp_path / "pol" / "manifest.json").read_text())["baseline"] == "median-loo"

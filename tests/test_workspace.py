"""Commands never destroy work and find the project from any folder (issue 16)."""

import csv
import hashlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from jsbench.backbones import load_backbone
from jsbench.policy.schedule_policy import make_policy
from jsbench.workspace import find_root, output_lock

REPO = Path(__file__).resolve().parents[1]
TINY_TRAIN = ["--steps", "3", "--policy", "global", "--iters", "1", "-B", "4", "-K", "2", "--no-progress"]


def _digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _one_line_refusal(result, *fragments):
    code, out, err = result
    assert code != 0 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    for frag in fragments:
        assert frag in lines[0], lines[0]


def test_train_refuses_a_folder_holding_a_policy_unless_overwrite(cli, tmp_path):
    folder = tmp_path / "shipped"
    make_policy(load_backbone("analytic"), 3, "global").save(folder, {"backbone": "analytic", "baseline": "js"})
    (folder / "train_log.jsonl").write_text('{"iteration": 0, "reward": 0.5}\n')
    before = _digest(folder)
    _one_line_refusal(cli("train", "--out", folder, *TINY_TRAIN), "already holds a policy", "--overwrite")
    assert _digest(folder) == before  # nothing touched, the log not appended to
    code, out, err = cli("train", "--out", folder, *TINY_TRAIN, "--overwrite")
    assert code == 0, err
    log = (folder / "train_log.jsonl").read_text().splitlines()
    assert len(log) == 1 and '"reward": 0.5}' not in log[0]  # the old log was replaced, not appended to
    assert _digest(folder)["manifest.json"] != before["manifest.json"]  # the new run's manifest (its train config)


def test_a_refused_train_leaves_no_empty_folder(cli, tmp_path):
    _one_line_refusal(cli("train", "--out", tmp_path / "new", "--baseline", "ppo"), "unknown baseline")
    assert not (tmp_path / "new").exists()
    (tmp_path / "afile").write_text("x")
    _one_line_refusal(cli("train", "--out", tmp_path / "afile"), "is a file, not a folder")


def test_a_second_run_on_the_same_out_refuses_while_the_first_holds_it(cli, tmp_path):
    folder = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom jsbench.workspace import output_lock\n"
         "with output_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n", str(folder)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        _one_line_refusal(cli("train", "--out", folder, *TINY_TRAIN), "in use by another", f"pid {holder.pid}")
        assert not (folder / "train_log.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    # the kernel dropped the killed holder's lock: no stale lock blocks the next run
    with output_lock(folder):
        pass


def test_project_root_is_found_from_below_and_from_outside(tmp_path, monkeypatch):
    (tmp_path / "proj" / "policies").mkdir(parents=True)
    deep = tmp_path / "proj" / "a" / "b"
    deep.mkdir(parents=True)
    assert find_root(deep) == (tmp_path / "proj").resolve()
    # outside any project: the source checkout the package runs from (an editable install)
    assert find_root(tmp_path) == REPO


def test_policies_list_from_another_folder_finds_the_shipped_ones(cli):
    code, out, err = cli("policies", "list", "--format", "csv")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("path,backbone,steps")
    rows = list(csv.DictReader(io.StringIO(out)))
    shipped = {str(p.parent) for p in (REPO / "policies").rglob("manifest.json")}
    assert shipped and {r["path"] for r in rows} == shipped, out  # absolute: they do not lie below the current folder
    assert {r["backbone"] for r in rows} >= {"analytic", "scenes-dit"}


def test_legacy_leaderboard_csv_round_trips_through_its_tables():
    from jsbench.report.leaderboard import read_committed, render_csv, tables_from_csv

    committed = read_committed(REPO / "leaderboards" / "geneval.csv")
    tables = tables_from_csv(committed)
    assert len({t.key[:3] for t in tables}) == len(tables) >= 3
    rerendered = {(r["backbone"], r["steps"], r["method"], r["task"]): r for r in csv.DictReader(io.StringIO(render_csv(tables)))}
    for r in committed:  # every committed value survives, the ceiling row filed under each budget it sat in
        again = rerendered[(r["backbone"], r["steps"], r["method"], r["task"])]
        assert all(again[k] == r[k] for k in ("value", "stderr", "delta", "delta_stderr", "n_images")), (r, again)
    assert sum(1 for t in tables for row in t.rows) == sum(1 for r in committed if r["task"] == "overall")


@pytest.mark.slow
def test_compare_all_replaces_only_the_sections_it_evaluates_and_names_their_commands(cli, tmp_path):
    import json
    import shutil

    from jsbench.report.leaderboard import read_committed, tables_from_csv

    lb = tmp_path / "lb"
    lb.mkdir()
    for name in ("geneval.csv", "geneval.md"):
        shutil.copy(REPO / "leaderboards" / name, lb / name)
    (lb / "recipe.json").write_text(json.dumps({"runs": [{"suite": "geneval", "backbone": "analytic", "steps": [5], "seeds": 1, "zoo": "none"}]}))
    before = {t.key[:3]: t for t in tables_from_csv(read_committed(lb / "geneval.csv"))}
    code, out, err = cli("compare", "--all", "--leaderboards", lb, "--policies", tmp_path / "none", "--records", tmp_path / "r.jsonl",
                         "--no-plots", "--no-progress")
    assert code == 0, err
    assert "no learned policies for analytic at 5 steps" in err  # says so instead of writing default rows silently
    after = {t.key[:3]: t for t in tables_from_csv(read_committed(lb / "geneval.csv"))}
    assert set(after) == set(before)  # no section dropped
    fresh = after[("analytic", "jsbench/analytic-scenes", 5)]
    command = "jsbench compare --suite geneval --backbone analytic --steps 5 --seeds 1 --zoo none"
    assert [r["method"] for r in fresh.rows] == ["default", "ceiling (200 steps)"] and fresh.command == command
    for key in before:
        if key != fresh.key[:3]:
            assert after[key].rows == before[key].rows  # kept exactly, scenes-dit included
    md = (lb / "geneval.md").read_text()
    assert f"Made by `{command}`." in md and "Regenerate every section: `jsbench compare --all`" in md
    assert "## scenes-dit · jsbench/scenes-dit · 3 steps" in md
    scenes = md.split("## scenes-dit · jsbench/scenes-dit · 3 steps")[1].split("\n## ")[0]
    assert "| xctx" in scenes and "| ceiling (50 steps) | 50 |" in scenes  # its rows kept (a learned row may carry †)


def test_compare_all_refuses_per_run_options_and_a_bad_recipe(cli, tmp_path):
    (tmp_path / "recipe.json").write_text('{"runs": [{"suite": "geneval", "backbone": "analytic", "steps": [3], "speed": 2}]}')
    _one_line_refusal(cli("compare", "--all", "--leaderboards", tmp_path), "unknown key 'speed'")
    _one_line_refusal(cli("compare", "--all", "--backbone", "analytic", "--leaderboards", tmp_path), "--all takes --backbone")
    _one_line_refusal(cli("compare", "--all", "--leaderboards", tmp_path / "nowhere"), "no recipe at")
    _one_line_refusal(cli("compare", "--all", "--seed-base", "3", "--leaderboards", tmp_path), "--all takes --seed-base")


def test_compare_all_refuses_a_bad_run_before_the_first_run_starts(cli, tmp_path, monkeypatch):
    """Every recipe run's refusals come before any weights load: a bad third run stops the first two too."""
    import json

    import jsbench.backbones

    monkeypatch.setattr(jsbench.backbones, "load_backbone", lambda *a, **k: (_ for _ in ()).throw(AssertionError("weights loaded")))
    good = {"suite": "geneval", "backbone": "analytic", "steps": [3]}
    for bad, fragment in (({"zoo": "magic"}, "'magic' is not a zoo schedule"), ({"ocr_protocol": "mario"}, "--ocr-protocol")):
        (tmp_path / "recipe.json").write_text(json.dumps({"runs": [good, good, {**good, **bad}]}))
        code, out, err = cli("compare", "--all", "--leaderboards", tmp_path, "--no-progress")
        assert code == 2, err
        _one_line_refusal((code, out, err), fragment)


@pytest.mark.slow  # three evaluations of the analytic world (default and ceiling rows)
def test_scripts_write_committed_results_only_when_told(tmp_path, capsys, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("paired_gaps", REPO / "scripts" / "paired_gaps.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    committed = tmp_path / "committed.json"
    monkeypatch.setattr(mod, "COMMITTED", committed)  # stands in for bench/results/paired_gaps.json
    argv = ["--steps", "3", "--seeds", "1", "--policies", str(tmp_path / "none")]
    mod.main(argv)
    assert "nothing written" in capsys.readouterr().out and not committed.exists()
    mod.main(argv + ["--out", str(tmp_path / "mine.json")])
    assert (tmp_path / "mine.json").exists() and not committed.exists()
    mod.main(argv + ["--write"])
    assert '"ceiling"' in committed.read_text() and '"default"' in committed.read_text()


def test_compare_all_with_processes_launches_once_for_the_whole_recipe(cli, tmp_path, monkeypatch):
    """`compare --all --processes 2` launches its processes once (they run every recipe run), not once per run."""
    import json

    import jsbench.distributed as jd

    (tmp_path / "recipe.json").write_text(json.dumps({"runs": [{"suite": "geneval", "backbone": "analytic", "steps": [3]},
                                                               {"suite": "geneval", "backbone": "detail", "steps": [3]}]}))
    launched = []
    monkeypatch.setattr(jd, "launch_processes", lambda n, argv=None: launched.append(n) or 0)
    code, out, err = cli("compare", "--all", "--processes", "2", "--leaderboards", tmp_path, "--no-progress")
    assert code == 0, err
    assert launched == [2]

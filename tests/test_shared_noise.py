"""Runs trained before seeds were independent: `--noise-stream shared` repeats them, and their rows say so."""

import json
import shlex
from pathlib import Path

from jsbench.report.leaderboard import SHARED_NOISE_LEGEND, Table, method_cell, read_committed, render_csv, table_legend, tables_from_csv
from jsbench.evaluation.results import seeds_share_noise
from jsbench.train.reinforce import TRAIN_SEED_BASE, TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]


def test_a_shared_stream_is_seed_zeros_for_every_seed(tmp_path):
    cfg = dict(steps=3, iters=4, contexts=4, samples=2, heldout_prompts=0)
    own = Trainer(TrainConfig(**cfg, seed=2), tmp_path / "own").contexts_for(3)[1]
    shared = Trainer(TrainConfig(**cfg, seed=2, noise_stream="shared"), tmp_path / "shared").contexts_for(3)[1]
    zero = Trainer(TrainConfig(**cfg, seed=0), tmp_path / "zero").contexts_for(3)[1]
    assert shared == zero == [TRAIN_SEED_BASE + 3 * 4 + b for b in range(4)] and not set(own) & set(shared)


def test_the_shipped_runs_that_share_noise_say_so_in_their_command():
    shared = [m for m in ROOT.glob("policies/*/*/seed*/manifest.json") if json.loads(m.read_text())["train"].get("noise_stream") == "shared"]
    for m in shared:
        argv = shlex.split(json.loads(m.read_text())["command"])
        assert argv[argv.index("--noise-stream") + 1] == "shared", m
    # only whole rows share a stream, never some of a row's seeds
    rows = {m.parent.parent for m in shared}
    assert all(len(list(r.glob("seed*/manifest.json"))) == len([m for m in shared if m.parent.parent == r]) for r in rows)


def test_a_row_of_shared_noise_is_marked_on_the_page_and_in_the_csv(tmp_path):
    class Source:
        seed_manifests = [{"train": {"noise_stream": "shared"}}, {"train": {}}]

    assert seeds_share_noise(Source()) is True
    Source.seed_manifests = [{"train": {}}, {"train": {"noise_stream": "per-seed"}}]
    assert seeds_share_noise(Source()) is False
    Source.seed_manifests = [{"train": {"noise_stream": "shared"}}]
    assert seeds_share_noise(Source()) is None  # one seed: nothing shared
    row = {"method": "js", "steps": 3, "t": 0.5, "overall": 0.5, "stderr": 0.1, "delta": None, "delta_stderr": None, "train_seeds": 3,
           "converged": None, "shared_noise": True}
    t = Table(backbone="analytic", model_id="m", steps=3, tasks=["t"], rows=[row])
    assert method_cell(row) == "js ‡" and SHARED_NOISE_LEGEND in table_legend(t)
    (tmp_path / "x.csv").write_text(render_csv([t]))
    [back] = tables_from_csv(read_committed(tmp_path / "x.csv"))
    assert back.rows[0]["shared_noise"] is True and render_csv([back]) == (tmp_path / "x.csv").read_text()

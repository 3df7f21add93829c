"""A run a researcher can afford and resume: --limit, --save-images, compare's resume and --processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.report.compare import run_compare
from jsbench.report.compare_request import CompareRequest
from jsbench.evaluation.evaluate import noise_seed, resolve_schedule
from jsbench.evaluation.protocol import first_per_task
from jsbench.evaluation.runs import run_eval
from jsbench.suites import load_suite

SEEDS = 2


@pytest.fixture(scope="module")
def world():
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    return bb, suite, first_per_task(suite.items("test"), 1)


def test_save_images_writes_genevals_layout_with_each_images_sigmas(world, tmp_path):
    bb, suite, items = world
    source = resolve_schedule("shift:3", bb, 3)
    run_eval(bb, suite, source, tmp_path / "r.jsonl", seeds_per_prompt=SEEDS, items=items, progress=False, save_images=tmp_path / "img")
    folders = sorted(p.name for p in (tmp_path / "img").iterdir())
    assert folders == [f"{i:05d}" for i in range(len(items))]
    from PIL import Image

    for i, it in enumerate(items):
        folder = tmp_path / "img" / f"{i:05d}"
        assert json.loads((folder / "metadata.jsonl").read_text()) == it.entry()  # GenEval reads one JSON object
        assert sorted(p.name for p in (folder / "samples").iterdir()) == ["00000.png", "00001.png"]
        x = bb.initial_noise([noise_seed(it.prompt, k) for k in range(SEEDS)])  # image k's own noise
        cond = bb.encode([it.prompt] * SEEDS)
        sig = source.make(x, cond)
        images = bb.sample(x, cond, sig)
        for k in range(SEEDS):
            png = np.asarray(Image.open(folder / "samples" / f"{k:05d}.png"))
            want = (images[k].float().clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
            assert png.shape == want.shape and np.array_equal(png, want)
            schedule = json.loads((folder / "schedules" / f"{k:05d}.json").read_text())
            assert schedule["seed"] == k and schedule["prompt"] == it.prompt and schedule["steps"] == 3
            assert schedule["sigmas"] == pytest.approx(sig[k].double().tolist(), abs=1e-7)


class _Interrupt(Exception):
    pass


def _compare(bb, suite, items, root: Path, **kw):
    request = CompareRequest(steps=(3,), policies=root / "no-policies", records=root / "records.jsonl", leaderboards=root / "lb", seeds=SEEDS,
                             plots=False, progress=False, zoo="none", schedule=("shift:3",), batch_size=4, **kw)
    return run_compare(request, bb, suite, items=items, log=lambda m: None)


def test_an_interrupted_compare_resumes_without_resampling_finished_images(world, tmp_path, monkeypatch):
    bb, suite, items = world
    (tmp_path / "lb").mkdir()
    calls: list[int] = []
    real_sample = type(bb).sample

    def sample(self, x_T, cond, sigmas, stop_at=None):
        calls.append(sigmas.shape[1] - 1)
        if stop_at is not None and len(calls) == stop_at:
            raise _Interrupt
        return real_sample(self, x_T, cond, sigmas)

    n_batches = -(-len(items) * SEEDS // 4)
    # rows: default (3 steps), shift 3 (3 steps), ceiling (200): stop in the ceiling's second batch
    monkeypatch.setattr(type(bb), "sample", lambda self, x, c, s: sample(self, x, c, s, stop_at=2 * n_batches + 2))
    with pytest.raises(_Interrupt):
        _compare(bb, suite, items, tmp_path)
    assert list(tmp_path.glob(".records.jsonl.*.partial.jsonl"))  # the side files are kept for the rerun
    calls.clear()
    monkeypatch.setattr(type(bb), "sample", lambda self, x, c, s: sample(self, x, c, s))
    resumed = _compare(bb, suite, items, tmp_path)
    assert calls == [200] * (n_batches - 1)  # only the ceiling's unfinished batches are sampled again
    assert not list(tmp_path.glob(".records.jsonl.*.partial.jsonl"))  # filed: the side files are gone
    monkeypatch.setattr(type(bb), "sample", real_sample)
    (tmp_path / "fresh" / "lb").mkdir(parents=True)
    fresh = _compare(bb, suite, items, tmp_path / "fresh")
    assert [t.rows for t in resumed.tables] == [t.rows for t in fresh.tables]


def test_compare_limit_marks_the_section_partial_and_refuses_check(cli, tmp_path):
    args = ["compare", "--steps", "3", "--seeds", "2", "--limit", "1", "--zoo", "none", "--no-plots", "--no-progress",
            "--policies", tmp_path / "none", "--records", tmp_path / "r.jsonl", "--leaderboards", tmp_path / "lb"]
    (tmp_path / "lb").mkdir()
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    md = (tmp_path / "lb" / "geneval.md").read_text()
    assert "3 steps · partial" in md and "first 1 prompts of each task only" in md and "--limit 1" in md
    (section,) = json.loads(out)
    assert [r["method"] for r in section["rows"]] == ["default", "ceiling (200 steps)"]
    for row in section["rows"]:  # the same 6 prompts (one a task) x 2 seeds in every row
        assert row["n_images"] == 12 and row["counts"]["overall"] == [6, 12]
    code, _, err = cli(*args, "--check")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--limit" in err


def _cli(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "jsbench", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow  # two torchrun processes, each building the world
def test_compare_processes_2_gives_the_records_and_leaderboard_of_one(tmp_path):
    pytest.importorskip("accelerate", reason="multi-process runs need accelerate (the `scale` and `test` extras)")
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    out = {}
    for n in (1, 2):
        root = tmp_path / f"p{n}"
        (root / "lb").mkdir(parents=True)
        args = ["compare", "--steps", "3", "--seeds", "2", "--limit", "1", "--zoo", "none", "--schedule", "shift:3", "--no-plots",
                "--no-progress", "--policies", root / "none", "--records", root / "r.jsonl", "--leaderboards", root / "lb",
                "--save-images", root / "img", "--format", "csv"]
        res = _cli(*args, *(["--processes", "2"] if n == 2 else []), env=env)
        assert res.returncode == 0, res.stderr
        records = [json.loads(ln) for ln in (root / "r.jsonl").read_text().splitlines()]
        out[n] = {
            "stdout": res.stdout,
            "records": [{k: v for k, v in r.items() if k != "created"} for r in records],
            "csv": (root / "lb" / "geneval.csv").read_text(),
            "scores": (root / "lb" / "geneval.scores.jsonl").read_text(),
            "images": sorted(str(p.relative_to(root / "img")) for p in (root / "img").rglob("*.png")),
            "partials": list(root.glob(".r.jsonl.*.partial.jsonl")),
        }
    assert out[2]["records"] == out[1]["records"]
    assert out[2]["csv"] == out[1]["csv"] and out[2]["scores"] == out[1]["scores"] and out[2]["stdout"] == out[1]["stdout"]
    assert out[2]["images"] == out[1]["images"] and len(out[1]["images"]) == 3 * 6 * 2  # 3 rows, 6 prompts, 2 seeds
    assert out[1]["partials"] == out[2]["partials"] == []


@pytest.mark.slow  # a compare on a tiny diffusers pipeline: three rows, one of 28 steps
def test_a_real_model_compare_follows_the_suites_protocol(cli, tmp_path):
    """On a real (diffusers) backbone: the suite's images per prompt (OCR: 4), no teacher-based zoo rows unless
    asked, and the ceiling at the pipeline's own default step count, labelled so."""
    pytest.importorskip("diffusers")
    pytest.importorskip("rapidocr_onnxruntime", reason="the OCR suite reads images with rapidocr (the `ocr` extra)")
    from tiny_pipelines import tiny_dir

    (tmp_path / "lb").mkdir()
    code, out, err = cli("compare", "--backbone", "flux-dev", "--model", tiny_dir("flux-dev"), "--suite", "ocr", "--steps", "3",
                         "--limit", "1", "--no-plots", "--no-progress", "--records", tmp_path / "r.jsonl",
                         "--leaderboards", tmp_path / "lb", "--format", "json")
    assert code == 0, err
    (section,) = json.loads(out)
    rows = {r["method"]: r for r in section["rows"]}
    assert set(rows) == {"default", "karras", "ceiling (28 steps, pipeline default)"}
    assert rows["ceiling (28 steps, pipeline default)"]["steps"] == 28
    for r in rows.values():  # each task: 1 prompt (--limit 1) x 4 images (the OCR protocol)
        tasks = {t: c for t, c in r["counts"].items() if t != "overall"}
        assert tasks and all(c == [1, 4] for c in tasks.values()) and r["n_images"] == 4 * len(tasks), r
    assert "--seeds 4 --zoo karras,ays --limit 1" in section["command"]

"""`jsbench train | eval --backbone flux-dev --model PATH` end to end on the tiny Flux-Dev pipeline (issue 3, item 6).

The OCR suite is used because it is the one suite that scores images from any backbone (geneval's
detectors are the embedded world's). Random weights read no words, so scores are 0: the point is that
the real-backbone path (loading from a folder, per-row schedules from a policy, records) runs through.
`compare` is not run here: its 200-step ceiling row costs minutes on CPU.
"""

from __future__ import annotations

import json

import pytest

from tiny_pipelines import one_thread, tiny_dir

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_train_then_eval_flux_dev_from_a_local_folder(cli, tmp_path):
    model = str(tiny_dir("flux-dev"))
    code, out, err = cli(
        "train", "--backbone", "flux-dev", "--model", model, "--suite", "ocr", "--reward", "ocr",
        "--steps", "2", "--iters", "2", "-B", "3", "-K", "2", "--device", "cpu", "--out", tmp_path / "pol", "--no-progress",
    )
    if code != 0 and "engine" in err.lower():
        pytest.skip(f"no OCR engine here: {err.strip()}")
    assert code == 0, err
    manifest = json.loads((tmp_path / "pol" / "manifest.json").read_text())
    assert manifest["steps"] == 2 and "flux-dev" in json.dumps(manifest)
    rec = tmp_path / "rec.jsonl"
    code, out, err = cli(
        "eval", "--suite", "ocr", "--backbone", "flux-dev", "--model", model, "--steps", "2", "--seeds", "1",
        "--schedule", f"policy:{tmp_path / 'pol'}", "--device", "cpu", "--out", rec, "--no-progress",
    )
    assert code == 0, err
    records = [json.loads(line) for line in rec.read_text().splitlines()]
    assert records and all(r["backbone"] == "flux-dev" and r["steps"] == 2 for r in records)
    assert {r["task"] for r in records} >= {"overall"}

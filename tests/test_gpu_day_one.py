"""scripts/gpu_day_one.sh (issue 40): the full-size device run, its CPU dry run and what --plan reads of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the dry run's families: one per code path (SD-XL's UNet, SD3.5's MMDiT, Flux's packed tokens); the two
# left out (sd35-large, flux-schnell) differ from these only in their configs, which test_full_size.py builds on meta
DRY_RUN = ["flux-dev", "sd35-medium", "sdxl"]


def test_gpu_day_one_refuses_bad_arguments_in_one_line():
    for args in (["--bogus"], ["a.json", "b.json"]):
        done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_day_one.sh"), *args], capture_output=True, text=True)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "gpu_day_one:" in done.stderr, done.stderr


@pytest.mark.slow
def test_gpu_day_one_cpu_dry_run_writes_its_families_and_plan_reads_a_device_run(tmp_path):
    out = tmp_path / "day_one.json"
    env = {**os.environ, "PYTHON": sys.executable, "FAMILIES": " ".join(DRY_RUN)}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_day_one.sh"), "--cpu", str(out)], capture_output=True, text=True, env=env,
                          timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["ok"] and data["dry_run"] and not data["failures"] and sorted(data["families"]) == DRY_RUN
    for kind, fam in data["families"].items():
        assert fam["meta_build"]["ok"] and fam["meta_build"]["devices"] == ["meta"], kind  # full size, nothing materialised
        assert set(fam["full_size"]["weights"]) == {"denoiser", "text_encoders", "vae"}
        rows = [r for r in fam["steps"]["batches"] if r.get("fits")]
        assert rows and all(r["seconds_per_step"] > 0 and r["images"] >= 1 for r in rows), kind
        assert fam["image"]["seconds_per_image"] > 0 and fam["image"]["finite"] and fam["vae"]["seconds"] > 0
        assert fam["policy"]["forward_backward_seconds"] > 0 and 0 < fam["policy"]["share_of_one_image"] < 1
        assert fam["offload"] and all(v["ok"] for v in fam["offload"].values())
    assert data["cli"]["ok"] and data["cli"]["train"]["updates"] == 2 and data["cli"]["eval"]["exit"] == 0
    # a dry run is never a measurement; the same JSON from an H200 is, for every family, per image
    from jsbench.report.plan import full_size_costs, throughput

    costs = full_size_costs()
    assert throughput("h200", "sdxl", costs["sdxl"]["step_flops"], out)[1].startswith("assumed")
    device_run = tmp_path / "gpu_day_one.json"
    device_run.write_text(json.dumps({**data, "dry_run": False, "device": "NVIDIA H200"}))
    for kind in DRY_RUN:
        fastest = max(r["images"] / r["seconds_per_step"] for r in data["families"][kind]["steps"]["batches"] if r.get("fits"))
        tflops, source = throughput("h200", kind, costs[kind]["step_flops"], device_run)
        assert "measured on NVIDIA H200" in source and tflops == pytest.approx(costs[kind]["step_flops"] * fastest / 1e12), kind

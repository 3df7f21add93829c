"""`--schedule file:PATH` reads what `jsbench schedules export --format json` writes (issue 37 item 7): a shared
schedule comes back as one row, an instance-level policy's per-image schedules come back per image (matched by
the exported noise seeds), and evaluating the file scores every image as the original source did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "analytic" / "js-n3" / "seed0"


def _export(cli, tmp_path: Path, spec: str, seeds: int = 2) -> Path:
    code, out, err = cli("schedules", "export", "--schedule", spec, "--steps", "3", "--limit", "1", "--seeds", str(seeds), "--format", "json")
    assert code == 0, err
    path = tmp_path / "export.json"
    path.write_text(out)
    return path


def _scores(cli, tmp_path: Path, spec: str, name: str, seeds: int = 2) -> list:
    out = tmp_path / f"{name}.jsonl"
    code, _, err = cli("eval", "--schedule", spec, "--steps", "3", "--limit", "1", "--seeds", str(seeds), "--out", out, "--no-progress")
    assert code == 0, err
    return [(r["task"], r["value"]) for r in map(json.loads, out.read_text().splitlines())]


@pytest.mark.parametrize("spec, form", [("shift:3", "shared"), (f"policy:{POLICY}", "per_image")])
def test_an_export_read_back_scores_as_its_source(cli, tmp_path, spec, form):
    from jsbench.zoo.files import read_schedule_file

    path = _export(cli, tmp_path, spec)
    sf = read_schedule_file(path, 3)
    assert {"shared": sf.shared is not None, "per_image": bool(sf.per_image)}[form]
    assert _scores(cli, tmp_path, f"file:{path}", "file") == _scores(cli, tmp_path, spec, "source")


def test_a_per_image_export_gives_each_image_its_own_row_and_refuses_one_it_lacks(cli, tmp_path):
    from jsbench.backbones import load_backbone
    from jsbench.evaluation.evaluate import noise_seed, resolve_schedule
    from jsbench.zoo import ZooError

    path = _export(cli, tmp_path, f"policy:{POLICY}")
    data = json.loads(path.read_text())
    bb = load_backbone("analytic", device="cpu")
    source = resolve_schedule(f"file:{path}", bb, 3)
    prompts = data["prompts"][::-1]  # another order than exported: each row is found by its noise
    x = bb.initial_noise(data["seeds"][::-1])
    rows = source.make(x, bb.encode(prompts))
    assert torch.equal(rows, torch.tensor(data["flow_sigmas"][::-1], dtype=torch.float32))
    assert not torch.equal(rows[0], rows[1])  # an instance-level policy: one schedule per image
    with pytest.raises(ZooError, match="no exported schedule for this image"):
        source.make(bb.initial_noise([noise_seed(prompts[0], 7)]), bb.encode(prompts[:1]))

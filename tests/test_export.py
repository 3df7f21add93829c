"""`jsbench schedules export`: the exported sigmas, handed to the diffusers pipeline with the same latents, give
jsbench's image, and the pipeline's scheduler runs exactly the grid it was given (diffusers issue 14461: a
FlowMatchEuler scheduler can re-map or ignore an explicit grid)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("diffusers")

from tiny_pipelines import PROMPTS, TINY_KINDS, image_tolerance, one_thread, pipeline_kwargs, test_device, tiny_mu_dir  # noqa: F401

from jsbench.backbones import load_backbone
from jsbench.evaluation.evaluate import ScheduleSource
from jsbench.evaluation.export import export_schedules, export_text
from jsbench.schedule import sigmas_from_increments

STEPS = 4
SEEDS = [0, 1]


def _per_row_source(steps: int) -> ScheduleSource:
    """A schedule that differs per row (like an instance-level policy's): Dirichlet increments seeded by the row's
    noise, no step below 2%."""

    def make(x, cond):
        rows = []
        for b in range(x.shape[0]):
            seed = int(abs(float(x[b].flatten()[:8].double().sum())) * 1e6) % 2**31
            inc = np.random.default_rng(seed).dirichlet(np.full(steps, 1.5))
            rows.append(torch.from_numpy(0.02 + (1 - 0.02 * steps) * inc))
        return sigmas_from_increments(torch.stack(rows)).to(torch.float32)

    return ScheduleSource("per-row", "per-row", steps, make)


@pytest.fixture(params=TINY_KINDS)
def bb(request):
    # Flux-Dev at the 1024^2 dynamic shift (mu = 1.15): the scheduler shifts a given grid, the export undoes it
    return load_backbone(request.param, model=str(tiny_mu_dir(request.param)), device=test_device())


def test_pipeline_given_exported_sigmas_and_latents_reproduces_jsbenchs_image(bb, one_thread):  # noqa: F811
    source = _per_row_source(STEPS)
    prompts = PROMPTS[:2]
    data = export_schedules(bb, source, prompts, SEEDS)
    assert json.loads(export_text(data, "json"))["sigmas"] == data["sigmas"]
    assert len(data["sigmas"]) == len(prompts) * len(SEEDS) and data["pipeline"] == type(bb.pipe).__name__
    rows = list(zip(data["prompts"], data["seeds"]))  # each image's own noise seed, as eval draws it
    assert data["images"] == [k for _ in prompts for k in SEEDS]
    x = bb.initial_noise([s for _, s in rows])
    flow = torch.tensor(data["flow_sigmas"], dtype=torch.float32)
    assert not torch.allclose(flow[0], flow[1])  # one schedule per image
    ours = bb.sample(x, bb.encode([p for p, _ in rows]), flow.to(bb.device))
    kw = pipeline_kwargs(bb, STEPS)
    kw.pop("num_inference_steps")
    for r, (prompt, seed) in enumerate(rows):
        ref = bb.pipe([prompt], latents=bb.initial_noise([seed]).clone(), sigmas=data["sigmas"][r], output_type="pt", **kw).images
        diff = (ours[r : r + 1].float() - ref.float().to(ours.device)).abs().max().item()
        # fp32: measured <= 6e-7 (the scheduler's float32 shift of the grid), image_tolerance is 1e-5; an export
        # that did not undo the shift differs by 0.014-0.032. bf16 (JSBENCH_TEST_DEVICE=cuda): a batched row against
        # a single-row call, so the custom-schedule latent tolerance of the parity tests
        assert diff <= (image_tolerance(bb) if bb.dtype == torch.float32 else 5e-2), f"row {r}: {diff}"
        realised = bb.pipe.scheduler.sigmas.double().cpu()
        if bb.clock_kind == "flow":  # flow time, terminal 0 appended by the scheduler
            want = flow[r].double()
        else:  # SD-XL: EulerDiscrete's VE sigmas, which the export hands over as they are
            want = torch.tensor(data["sigmas"][r], dtype=torch.float64)
        assert realised.shape == want.shape, f"row {r}: the scheduler ran {realised.numel() - 1} steps, not {STEPS}"
        assert torch.allclose(realised, want, rtol=1e-5, atol=1e-6), f"row {r}: realised {realised.tolist()} != {want.tolist()}"


def test_export_cli_json_on_the_embedded_world(cli):
    code, out, err = cli("schedules", "export", "--steps", "3", "--limit", "1", "--seeds", "2", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert len(data["sigmas"]) == 6 * 2 and all(len(row) == 4 and row[0] == 1.0 and row[-1] == 0.0 for row in data["sigmas"])
    from jsbench.evaluation.evaluate import noise_seed

    assert data["images"][:2] == [0, 1] and data["pipeline"] is None
    assert data["seeds"][:2] == [noise_seed(data["prompts"][0], 0), noise_seed(data["prompts"][0], 1)]
    code, out, err = cli("schedules", "export", "--steps", "3", "--limit", "1", "--format", "csv")
    assert code == 2 and len(err.strip().splitlines()) == 1

"""Take a schedule out of jsbench: per-image sigmas that the user's own diffusers pipeline runs as they are.

`export_schedules(backbone, source, prompts, seeds)` evaluates a schedule source (a policy, a zoo row, a file,
the default) on prompts x seeds, exactly as `jsbench eval` samples them: the same encoded prompts, the same
initial noise per seed (`backbone.initial_noise`, which is what the pipeline draws from
`torch.Generator("cpu").manual_seed(seed)`), so an instance-level policy sees what it sees in evaluation.

For every image it returns
- `sigmas`: what to pass as the pipeline's `sigmas=` so that it runs this schedule: for FluxPipeline and
  StableDiffusion3Pipeline the N non-terminal flow sigmas pre-compensated for the shift the scheduler applies
  to a given grid (`pipeline_sigmas`), for StableDiffusionXLPipeline the N+1 VE sigmas of EulerDiscrete;
  on an embedded world, which has no pipeline, the flow sigmas;
- `flow_sigmas`: the schedule in jsbench's clock (flow time, 1 -> 0, N+1 values), which `--schedule file:PATH`
  reads back.
"""

from __future__ import annotations

import torch

from jsbench.backbones.base import eval_batch_size
from jsbench.schedule import check_sigmas


def export_schedules(backbone, source, prompts: list[str], images: list[int], batch_size: int | None = None) -> dict:
    """{"backbone", "model_id", "schedule", "steps", "pipeline", "prompts", "images", "seeds", "sigmas", "flow_sigmas"}:
    one entry per (prompt, image k), prompts outer, images inner (the order of `jsbench eval`). `seeds` are the
    noise seeds eval draws image k of each prompt from (`noise_seed(prompt, k)`): the seed to give the pipeline's
    CPU generator for the same latents."""
    from jsbench.evaluation.evaluate import noise_seed

    rows = [(p, k, noise_seed(p, k)) for p in prompts for k in images]
    batch = batch_size or eval_batch_size(backbone)
    flow: list[torch.Tensor] = []
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        cond = backbone.encode([p for p, _, _ in chunk])
        x_T = backbone.initial_noise([seed for _, _, seed in chunk])
        sig = source.make(x_T, cond)
        check_sigmas(sig, free_start=backbone.clock_kind == "flow")
        flow += list(sig.detach().to(torch.float32).cpu())
    to_pipeline = getattr(backbone, "pipeline_sigmas", None)
    sigmas = [to_pipeline(row) if to_pipeline else row.tolist() for row in flow]
    pipe = getattr(backbone, "pipe", None)
    return {
        "backbone": backbone.name, "model_id": backbone.model_id, "schedule": source.spec, "steps": source.steps,
        "pipeline": type(pipe).__name__ if pipe is not None else None,
        "prompts": [p for p, _, _ in rows], "images": [k for _, k, _ in rows], "seeds": [seed for _, _, seed in rows],
        "sigmas": [[float(v) for v in row] for row in sigmas],
        "flow_sigmas": [[float(v) for v in row.tolist()] for row in flow],
    }


def export_text(data: dict, fmt: str = "table") -> str:
    """The export as JSON, or one line per image: seed, prompt and the sigmas to pass to the pipeline."""
    import json

    if fmt == "json":
        return json.dumps(data) + "\n"
    head = f"# {data['backbone']} · {data['schedule']} · {data['steps']} steps"
    head += f" · sigmas= for {data['pipeline']}" if data["pipeline"] else " · flow-time sigmas"
    lines = [head]
    for prompt, seed, row in zip(data["prompts"], data["seeds"], data["sigmas"]):
        lines.append(f"{seed}\t{prompt}\t{' '.join(f'{v:.6g}' for v in row)}")
    return "\n".join(lines) + "\n"

"""`jsbench schedules plot` and `schedules export`: schedules drawn, with an image grid per source, or printed as
per-image sigmas for a diffusers pipeline."""

from __future__ import annotations

import sys

from jsbench import JsbenchError
from jsbench.cli_options import OutputFormat
from jsbench.commands.common import check_device, check_outputs, load_backbone_quietly


def plot_schedules_command(*, schedule, suite, backbone, model, steps, seeds, out, device, console) -> int:
    """What `jsbench schedules plot` does with its options; the exit code."""
    from jsbench.evaluation.evaluate import resolve_schedule
    from jsbench.report.compare import suite_verdicts
    from jsbench.report.plots import plot_image_grid, plot_schedules
    from jsbench.suites import load_suite

    check_outputs(out_folder=out)
    check_device(device)
    bb = load_backbone_quietly(backbone, model, device)
    s = load_suite(suite, bb)
    sources = [resolve_schedule(spec, bb, steps, suite=s) for spec in schedule]
    prompts = list({it.task: it.prompt for it in s.items("test")}.values())[:6]
    for path in (
        plot_schedules(bb, sources, prompts, list(range(seeds)), out / "schedules.png", title=f"{bb.name} · {steps} steps · schedules"),
        plot_image_grid(bb, sources, prompts, 0, out / "images.png", suite_verdicts(s, s.items("test")), title=f"{bb.name} · {steps} steps"),
    ):
        console.print(f"wrote {path}")
    return 0


def export_schedules_command(*, schedule, suite, backbone, model, steps, seeds, split, limit, prompts_file, device, dtype, fmt, err) -> int:
    """What `jsbench schedules export` does with its options; the exit code."""
    from jsbench.evaluation.evaluate import EVAL_SEED_BASE, items_for_prompts, read_prompts_file, resolve_schedule
    from jsbench.evaluation.export import export_schedules, export_text
    from jsbench.evaluation.protocol import check_limit, first_per_task
    from jsbench.suites import load_suite

    if fmt == OutputFormat.csv:
        raise JsbenchError("schedules export prints --format table or json")
    if seeds < 1:
        raise JsbenchError(f"--seeds must be at least 1, got {seeds}")
    check_limit(limit)
    prompt_list = read_prompts_file(prompts_file) if prompts_file is not None else None
    bb = load_backbone_quietly(backbone, model, device, dtype, progress=False)
    s = load_suite(suite, bb)
    items = items_for_prompts(s, prompt_list, prompts_file) if prompt_list is not None else s.items(split)
    items = first_per_task(items, limit)
    source = resolve_schedule(schedule, bb, steps, suite=s, log=lambda m: err.print(m, highlight=False, soft_wrap=True))
    data = export_schedules(bb, source, [it.prompt for it in items], list(range(EVAL_SEED_BASE, EVAL_SEED_BASE + seeds)))
    sys.stdout.write(export_text(data, fmt.value))
    return 0

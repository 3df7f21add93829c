"""`jsbench eval`: --plan, the refusals before any weights load, --processes, then one schedule evaluated on a
suite, its records appended and shown."""

from __future__ import annotations

import sys

from jsbench.cli_options import OutputFormat
from jsbench.commands.common import check_device, check_outputs, command_line, load_backbone_quietly


def run_eval_command(*, suite, backbone, model, steps, schedule, seeds, seed_base, split, metadata, prompts_file, ocr_protocol, out,
                     batch_size, device, dtype, offload, decode_chunk, guidance, offload_mode, progress, fmt, processes, limit,
                     save_images, plan, gpu, console, err) -> int:
    """What `jsbench eval` does with its options; the exit code."""
    if plan:
        from jsbench.report.plan import plan_eval, plan_text

        p = plan_eval(suite, backbone, steps, schedule, gpu=gpu, seeds=seeds, split=split, limit=limit, command=command_line())
        sys.stdout.write(plan_text(p, "json" if fmt == OutputFormat.json else "table"))
        return 0
    check_outputs(out=out)  # refused before any process starts or weights load
    check_device(device)
    from jsbench.backbones import backbone_class
    from jsbench.evaluation.evaluate import items_for_prompts, read_prompts_file, resolve_schedule
    from jsbench.evaluation.protocol import check_limit, default_seeds, first_per_task, is_real
    from jsbench.evaluation.runs import run_eval, validate_eval_options
    from jsbench.suites import load_suite, preflight, suite_options

    # refused before --processes starts any process (a typo costs no launch) and before any weights load
    validate_eval_options(split, suite, metadata)
    options = suite_options(suite, ocr_protocol)
    check_limit(limit)
    preflight(suite, backbone_class(backbone))  # what the suite cannot score (ocr without text, hpdv2 without HPSv2)
    prompt_list = read_prompts_file(prompts_file) if prompts_file is not None else None
    if processes > 1:
        from jsbench.distributed import launch_processes

        return launch_processes(processes)
    from jsbench.devices import pick_device
    from jsbench.distributed import get_context

    ctx = get_context()
    bb = load_backbone_quietly(backbone, model, pick_device(device, dist=ctx), dtype, offload_mode or offload, decode_chunk, progress, guidance)  # one accelerator per process
    s = load_suite(suite, bb, **options, **({"metadata": str(metadata)} if metadata is not None else {}))
    items = items_for_prompts(s, prompt_list, prompts_file) if prompt_list is not None else None
    if limit is not None:
        items = first_per_task(items if items is not None else s.items(split), limit)
    seeds = default_seeds(suite, is_real(bb)) if seeds is None else seeds  # 0 is refused by evaluate, in one line
    source = resolve_schedule(schedule, bb, steps, suite=s, log=lambda m: err.print(m, highlight=False, soft_wrap=True))
    _, records = run_eval(bb, s, source, out, seeds_per_prompt=seeds, split=split, items=items, batch_size=batch_size, progress=progress, ctx=ctx,
                          seed_base=seed_base, save_images=save_images)
    if ctx.is_main:  # rank 0 writes the records once
        from jsbench.commands import tables

        if fmt != OutputFormat.table:  # every record field, exact
            sys.stdout.write(tables.records_text(fmt.value, records))
        else:
            console.print(tables.eval_table(records, suite, bb.name, source))
    ctx.close()  # every process leaves the group together, once rank 0 has written
    return 0

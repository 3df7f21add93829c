"""`jsbench train`: the recipe applied, --plan, the refusals before any weights load, --processes, then the run
in its locked folder (Ctrl-C: the command that resumes, exit 130)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

from jsbench import JsbenchError
from jsbench.commands.common import check_device, check_outputs, command_line
from jsbench.train.config import TrainConfig


def run_train(fields: dict, *, out: Optional[Path], resume: bool, overwrite: bool, progress: bool, processes: int, plan: bool, gpu: str,
              console, err) -> int:
    """What `jsbench train` does with its options (`fields`: TrainConfig's); the exit code."""
    import dataclasses

    from jsbench.report.plan import apply_recipe

    fields = {k: v.value if isinstance(v, Enum) else v for k, v in fields.items()}
    fields = apply_recipe(fields, fields.get("recipe"), {f.name: f.default for f in dataclasses.fields(TrainConfig)})
    if plan:
        from jsbench.report.plan import plan_text, plan_train

        p = plan_train(fields["backbone"], fields["steps"], fields["iters"], fields["contexts"], fields["samples"], gpu=gpu,
                       recipe=fields.get("recipe"), command=command_line())
        sys.stdout.write(plan_text(p))
        return 0
    if out is None:
        raise JsbenchError("train needs --out FOLDER (the policy, its checkpoint and log go there)")
    config = TrainConfig(**fields)
    from jsbench.suites import preflight, suite_options

    options = suite_options(config.suite, config.ocr_protocol, config.prompts_file)  # refused before OUT is locked or any weights load
    preflight(config.suite, None, **options)  # what the suite cannot score with them (ocr: a prompts file's bad line)
    check_outputs(out_folder=out)  # refused before any process starts or weights load
    check_device(config.device)
    if processes > 1:
        from jsbench.distributed import launch_processes

        return launch_processes(processes)
    from jsbench.train.reinforce import Trainer

    import contextlib

    from jsbench.distributed import get_context
    from jsbench.workspace import clear_run, output_lock, refuse_to_replace

    refuse_to_replace(out, resume, overwrite)  # before the lock: a refused folder is left exactly as it was
    from jsbench.progress import quiet_model_loading

    quiet_model_loading(show_bars=progress)
    try:
        with output_lock(out, "jsbench train") if get_context().is_main else contextlib.nullcontext():  # rank 0 writes OUT
            refuse_to_replace(out, resume, overwrite)  # again, now that no other run can write OUT
            trainer = Trainer(config, out)
            if resume:
                trainer.resume()
            elif overwrite and trainer.dist.is_main:
                clear_run(out)
            trainer.train(progress=progress)
            path = trainer.save_policy()
    except KeyboardInterrupt:  # Ctrl-C: one line saying how to go on, exit 130
        from jsbench.workspace import resume_command

        if get_context().is_main:
            saved = (out / "checkpoint.pt").is_file()
            how = "resume with" if saved else "no checkpoint yet; start again with"
            err.print(f"interrupted; {how}: {resume_command(sys.argv[1:], saved)}", highlight=False, soft_wrap=True)
        return 130
    if trainer.dist.is_main:
        console.print(f"policy written to [bold]{path}[/]")
    trainer.dist.close()  # every process leaves the group together
    return 0

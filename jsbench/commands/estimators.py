"""`jsbench estimators`: the estimator lab at one policy state or along a training run, or (--all) its committed
section regenerated or checked."""

from __future__ import annotations

import sys

from jsbench import JsbenchError
from jsbench.cli_options import OutputFormat
from jsbench.commands.common import load_backbone_quietly


def run_estimators(*, backbone, model, steps, contexts, samples, rollouts, seed, reward, suite, policy, mean_rollouts, mean_samples,
                   bootstrap, run, every, out, all_, check, leaderboards, policies, device, dtype, batch_size, progress, fmt, processes,
                   err) -> int:
    """What `jsbench estimators` does with its options; the exit code."""
    if processes > 1:
        from jsbench.distributed import launch_processes

        return launch_processes(processes)
    from jsbench.analysis import estimators as lab
    from jsbench.workspace import project_dir

    if all_:
        from jsbench.analysis.estimator_section import estimators_section

        return estimators_section(leaderboards or project_dir("leaderboards"), policies or project_dir("policies"),
                                  check=check, progress=progress, log=lambda m: err.print(m, highlight=False, soft_wrap=True),
                                  backbones=[backbone] if backbone else None)
    if check:
        raise JsbenchError("--check needs --all (it checks the committed section)")
    backbone = backbone or "analytic"
    config = lab.LabConfig(backbone=backbone, model=model, steps=steps, contexts=contexts, samples=samples, rollouts=rollouts,
                           seed=seed, reward=reward, suite=suite, policy=str(policy) if policy else None,
                           mean_rollouts=min(mean_rollouts, max(rollouts, 0)), mean_samples=mean_samples, bootstrap=bootstrap,
                           device=device, dtype=dtype, batch_size=batch_size)
    config.validate()  # refused before any weights load
    from jsbench.distributed import get_context

    ctx = get_context()
    from jsbench.devices import pick_device

    bb = load_backbone_quietly(backbone, model, pick_device(device, dist=ctx), dtype, progress=progress)  # one accelerator per process
    if run is not None:
        record = lab.run_lab_along(config, run, every, backbone=bb, progress=progress, dist=ctx)
    else:
        record = lab.run_lab(config, backbone=bb, progress=progress, dist=ctx)
    if ctx.is_main:
        from jsbench.analysis import estimator_rendering as rendering

        if out is not None:
            for path in rendering.write_lab_record(record, out):
                err.print(f"wrote {path}", highlight=False)
        if fmt == OutputFormat.json:
            import json

            sys.stdout.write(json.dumps(record, indent=1) + "\n")
        elif fmt == OutputFormat.csv:
            sys.stdout.write(rendering.lab_csv(record))
        else:
            sys.stdout.write(rendering.lab_text(record))
    ctx.close()
    return 0

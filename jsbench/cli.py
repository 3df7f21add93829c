"""The `jsbench` command line: thin, typed wrappers over the library.

Every refusal is one line on stderr and a non-zero exit; the library raises `JsbenchError` for them.
"""

from __future__ import annotations

import inspect
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from jsbench import JsbenchError
from jsbench.zoo.registry import spec_syntax  # the schedule sources' declarations: imports no torch
from jsbench.train_config import DECODE_HELP, DEVICE_HELP, DTYPE_HELP, GUIDANCE_HELP, MODEL_HELP, OFFLOAD_HELP, OFFLOAD_MODE_HELP, TrainConfig  # dataclasses only: --help stays fast
from jsbench.compare_request import (BACKBONE_HELP, FORMAT_HELP, GPU_HELP, IMAGES_BATCH_HELP, LIMIT_HELP, OCR_PROTOCOL_HELP, PLAN_HELP,  # likewise
                                     PROGRESS_HELP, SAVE_HELP, SEED_BASE_HELP, SEEDS_HELP, SUITE_HELP, CompareRequest)

def _no_bool_tag() -> None:
    """typer's rich help tags every option with its type, flags (`--resume/--no-resume`, `--help`) as `<bool>`,
    though a flag takes no value; show flags bare, as its plain-text help does, and a bounded int as
    `<int> [x>=1]` rather than `<int range> [x>=1]` (narrower columns at 80 columns)."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_jsbench", False):
        return

    def display_type_rich(self, ctx):
        if self.is_flag and not self.count:
            return None
        text = shown(self, ctx)
        return "<int>" if text == "<int range>" else text  # "<int> [x>=1]": the bounds say it is a range

    display_type_rich._jsbench = True
    TyperOption.display_type_rich = display_type_rich


_no_bool_tag()

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Learn instance-level sampling schedules for frozen text-to-image samplers, and benchmark them.\n\n"
    "Start with `jsbench compare`: it evaluates the default schedule, the shipped learned policies and the "
    "many-step ceiling on the embedded `analytic` world and writes leaderboards/geneval.md.",
)
def _version(value: bool) -> None:
    if value:
        from jsbench import __version__

        typer.echo(f"jsbench {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit.")) -> None:
    pass


policies_app = typer.Typer(no_args_is_help=True, help="List and inspect trained schedule policies.")
app.add_typer(policies_app, name="policies")
schedules_app = typer.Typer(no_args_is_help=True, help="Look at schedules: plot them, or export per-image sigmas for diffusers.")
app.add_typer(schedules_app, name="schedules")
detectors_app = typer.Typer(no_args_is_help=True, help="GenEval detectors: convert GenEval's official mmdet weights.")
app.add_typer(detectors_app, name="detectors")
console = Console()
err = Console(stderr=True)


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


# --help groups each command's options into these panels
RUN, OUT, BACKBONE, TRAINING, OPTIMIZER, CHECK, PLAN = "Run", "Output", "Backbone", "Training", "Optimizer", "Check (--check)", "Plan (--plan)"
_ROOT_HELP = "the nearest folder at or above the current one holding policies/ or leaderboards/, else the checkout jsbench is installed from"


def _backbone(name: str, model: Optional[str], device: Optional[str], dtype: Optional[str] = None, offload: bool | str = False,
              decode_chunk: Optional[int] = None, progress: bool = True, guidance: Optional[float] = None, share_with=None):
    from jsbench.backbones import load_backbone
    from jsbench.progress import quiet_model_loading

    quiet_model_loading(show_bars=progress)  # --no-progress also hides the libraries' loading bars

    return load_backbone(name, model, device, dtype=dtype, offload=offload, decode_chunk=decode_chunk, guidance=guidance,
                         share_with=share_with)


def _check_outputs(records: Optional[Path] = None, out: Optional[Path] = None, out_folder: Optional[Path] = None,
                   leaderboards: Optional[Path] = None, report: List[Path] = ()) -> None:
    """Refuse, before any work, an output this command could not write (one line, exit 2)."""
    from jsbench.io import check_writable_file, check_writable_folder

    for option, path in (("--records", records), ("--out", out)):
        if path is not None:
            check_writable_file(path, option)
    for option, path in (("--out", out_folder), ("--leaderboards", leaderboards)):
        if path is not None:
            check_writable_folder(path, option)
    for path in report:
        check_writable_file(path, "--report")


def _check_device(device: Optional[str]) -> None:
    """Refuse, before any weights load, a --device this torch cannot use (e.g. cuda on a CPU-only build)."""
    if device is not None:
        from jsbench.devices import pick_device

        pick_device(device)


# the backbone options of eval, compare and schedules plot, declared once: name -> typer.Option's arguments (the
# dtype, offload and decode-chunk helps are also those of train's TrainConfig fields)
_BACKBONE_OPTIONS = {
    "model": dict(default=None, help=MODEL_HELP, rich_help_panel=BACKBONE),
    "batch_size": dict(default=None, flags=("--batch-size",), min=1, help=IMAGES_BATCH_HELP, rich_help_panel=BACKBONE),
    "device": dict(default=None, help=DEVICE_HELP, rich_help_panel=BACKBONE),
    "dtype": dict(default=None, help=DTYPE_HELP, rich_help_panel=BACKBONE),
    "offload": dict(default=False, flags=("--offload",), help=OFFLOAD_HELP, rich_help_panel=BACKBONE),
    "decode_chunk": dict(default=None, flags=("--decode-chunk",), min=1, help=DECODE_HELP, rich_help_panel=BACKBONE),
    "progress": dict(default=True, help=PROGRESS_HELP, rich_help_panel=OUT),
    "guidance": dict(default=None, help=GUIDANCE_HELP, rich_help_panel=BACKBONE),
    "offload_mode": dict(default=None, flags=("--offload-mode",), help=OFFLOAD_MODE_HELP, rich_help_panel=BACKBONE),
}


def _backbone_option(name: str, **override):
    """A new typer.Option for backbone option `name` (each command gets its own), `override` replacing its arguments."""
    spec = {**_BACKBONE_OPTIONS[name], **override}
    return typer.Option(spec.pop("default"), *spec.pop("flags", ()), **spec)


def config_options(config_cls, panels: dict[str, str] | None = None) -> list[inspect.Parameter]:
    """A typer option per field of a config dataclass (TrainConfig, CompareRequest), built from the field's
    metadata (see jsbench/train_config.py): `help` (required), `flags` (default --field-name), `choices` (an
    enum of the values, whose `.value` the command passes on), `min`. The field's default is the option's; a
    `tuple[X, ...]` field is a repeatable option (typer passes a list). `panels` (field -> --help panel)
    groups them, the fields it does not name under "Options"."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        meta = f.metadata
        if not meta.get("help"):
            raise TypeError(f"{config_cls.__name__}.{f.name} has no help: declare it with metadata={{'help': ...}}")
        annotation, default = hints[f.name], f.default
        if meta.get("choices"):
            annotation = Enum(f"{f.name.title()}Choice", {c: c for c in meta["choices"]}, type=str)
            default = annotation(default)
        elif type(None) in typing.get_args(annotation):  # `X | None`, as typer reads it
            annotation = Optional[next(a for a in typing.get_args(annotation) if a is not type(None))]
        elif typing.get_origin(annotation) is tuple:  # `tuple[X, ...]`: the option repeated
            annotation, default = List[typing.get_args(annotation)[0]], list(default)
        extra = {"min": meta["min"]} if "min" in meta else {}
        if meta.get("metavar"):
            extra["metavar"] = meta["metavar"]  # instead of the choices, where they would widen the panel's column
        if meta.get("hidden"):
            extra["hidden"] = True  # accepted, not listed: an option kept for repeating older runs
        if panels and f.name in panels:
            extra["rich_help_panel"] = panels[f.name]
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                     default=typer.Option(default, *meta.get("flags", ()), help=meta["help"], **extra)))
    return out


def _option(name: str, annotation, default) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


# train's own options, around the TrainConfig fields: (placed after this field, or first / last)
_TRAIN_OPTIONS = {
    "first": [_option("out", Optional[Path], typer.Option(None, help="Run folder OUT (see above).", rich_help_panel=RUN))],
    "checkpoint_every": [
        _option("resume", bool, typer.Option(False, help="Continue exactly from OUT.", rich_help_panel=RUN)),
        _option("overwrite", bool, typer.Option(False, "--overwrite", help="Replace the run in OUT.", rich_help_panel=RUN)),
    ],
    "last": [
        _option("progress", bool, typer.Option(True, help=PROGRESS_HELP, rich_help_panel=RUN)),
        _option("processes", int, typer.Option(1, "--processes", min=1, help="Local processes (torchrun).", rich_help_panel=RUN)),
        _option("plan", bool, typer.Option(False, "--plan", help=PLAN_HELP, rich_help_panel=PLAN)),
        _option("gpu", str, typer.Option("h100", "--gpu", help=GPU_HELP, rich_help_panel=PLAN)),
    ],
}
# TrainConfig's fields in --help's panels (a new field lands under "Options" until named here; --ocr-protocol
# stays there, beside the held-out options whose scores it sets)
_TRAIN_PANELS = {
    "threads": RUN,  # main's TrainConfig.threads
    **dict.fromkeys(("recipe", "steps", "policy", "baseline", "reward", "suite", "iters", "contexts", "samples", "seed", "checkpoint_every"), TRAINING),
    **dict.fromkeys(("lr", "network_lr", "weight_decay", "grad_clip", "concentration", "width"), OPTIMIZER),
    **dict.fromkeys(("backbone", "model", "device", "dtype", "offload", "batch_size", "decode_chunk", "offload_mode", "guidance"), BACKBONE),
}


def _train_signature() -> inspect.Signature:
    params = list(_TRAIN_OPTIONS["first"])
    for p in config_options(TrainConfig, _TRAIN_PANELS):
        params += [p, *_TRAIN_OPTIONS.get(p.name, [])]
    return inspect.Signature(params + _TRAIN_OPTIONS["last"])


def train(*, out: Optional[Path], resume: bool, overwrite: bool, progress: bool, processes: int, plan: bool, gpu: str, **fields):
    """Train a schedule policy with REINFORCE and a baseline (default js).

    Writes OUT/policy.safetensors and manifest.json. OUT is locked while the run
    writes it; a folder holding a run needs --resume or --overwrite. Ctrl-C
    exits 130 and prints the command that resumes. Exit codes: 0 ok, 2 refused."""
    import dataclasses

    from jsbench.plan import apply_recipe

    fields = {k: v.value if isinstance(v, Enum) else v for k, v in fields.items()}
    fields = apply_recipe(fields, fields.get("recipe"), {f.name: f.default for f in dataclasses.fields(TrainConfig)})
    if plan:
        from jsbench.plan import plan_text, plan_train

        p = plan_train(fields["backbone"], fields["steps"], fields["iters"], fields["contexts"], fields["samples"], gpu=gpu,
                       recipe=fields.get("recipe"), command=_command_line())
        sys.stdout.write(plan_text(p))
        return
    if out is None:
        raise JsbenchError("train needs --out FOLDER (the policy, its checkpoint and log go there)")
    config = TrainConfig(**fields)
    from jsbench.suites import suite_options

    suite_options(config.suite, config.ocr_protocol)  # refused before OUT is locked or any weights load
    _check_outputs(out_folder=out)  # refused before any process starts or weights load
    _check_device(config.device)
    if processes > 1:
        from jsbench.distributed import launch_processes

        raise typer.Exit(launch_processes(processes))
    from jsbench.train import Trainer

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
        raise typer.Exit(130) from None
    if trainer.dist.is_main:
        console.print(f"policy written to [bold]{path}[/]")
    trainer.dist.close()  # every process leaves the group together


train.__signature__ = _train_signature()  # typer reads the options from it
app.command()(train)


@app.command("eval")
def eval_(
    suite: str = typer.Option("geneval", help=SUITE_HELP, rich_help_panel=RUN),
    backbone: str = typer.Option("analytic", help=BACKBONE_HELP, rich_help_panel=BACKBONE),
    model: Optional[str] = _backbone_option("model"),
    steps: int = typer.Option(5, help="Step budget.", rich_help_panel=RUN),
    schedule: str = typer.Option("default", metavar="SPEC", rich_help_panel=RUN,
                                 help=f"{spec_syntax()} (`jsbench plugins` lists them)."),
    seeds: Optional[int] = typer.Option(None, help=SEEDS_HELP, rich_help_panel=RUN),
    seed_base: int = typer.Option(0, "--seed-base", min=0, help=SEED_BASE_HELP, rich_help_panel=RUN),
    split: str = typer.Option("test", help="Prompts: test (held out), train or all.", rich_help_panel=RUN),
    metadata: Optional[Path] = typer.Option(None, help="GenEval evaluation_metadata.jsonl to evaluate instead.", rich_help_panel=RUN),
    prompts_file: Optional[Path] = typer.Option(None, "--prompts-file", help="UTF-8 file, one prompt a line, instead.", rich_help_panel=RUN),
    ocr_protocol: Optional[str] = typer.Option(None, "--ocr-protocol", help=OCR_PROTOCOL_HELP, rich_help_panel=RUN),
    out: Path = typer.Option(Path("results/records.jsonl"), help="Records file (JSONL, appended).", rich_help_panel=OUT),
    batch_size: Optional[int] = _backbone_option("batch_size"),
    device: Optional[str] = _backbone_option("device"),
    dtype: Optional[str] = _backbone_option("dtype"),
    offload: bool = _backbone_option("offload"),
    decode_chunk: Optional[int] = _backbone_option("decode_chunk"),
    guidance: Optional[float] = _backbone_option("guidance"),
    offload_mode: Optional[str] = _backbone_option("offload_mode"),
    progress: bool = _backbone_option("progress"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=FORMAT_HELP, rich_help_panel=OUT),
    processes: int = typer.Option(1, "--processes", min=1, help="Shard prompts over N local processes.", rich_help_panel=RUN),
    limit: Optional[int] = typer.Option(None, "--limit", help=LIMIT_HELP, rich_help_panel=RUN),
    save_images: Optional[Path] = typer.Option(None, "--save-images", help=SAVE_HELP, rich_help_panel=OUT),
    plan: bool = typer.Option(False, "--plan", help=PLAN_HELP, rich_help_panel=PLAN),
    gpu: str = typer.Option("h100", "--gpu", help=GPU_HELP, rich_help_panel=PLAN),
):
    """Evaluate one schedule on a suite and append its records."""
    if plan:
        from jsbench.plan import plan_eval, plan_text

        p = plan_eval(suite, backbone, steps, schedule, gpu=gpu, seeds=seeds, split=split, limit=limit, command=_command_line())
        sys.stdout.write(plan_text(p, "json" if fmt == OutputFormat.json else "table"))
        return
    _check_outputs(out=out)  # refused before any process starts or weights load
    _check_device(device)
    if processes > 1:
        from jsbench.distributed import launch_processes

        raise typer.Exit(launch_processes(processes))
    from jsbench.devices import pick_device
    from jsbench.distributed import get_context
    from jsbench.evaluate import items_for_prompts, read_prompts_file, resolve_schedule
    from jsbench.protocol import check_limit, default_seeds, first_per_task, is_real
    from jsbench.runs import run_eval, validate_eval_options
    from jsbench.suites import load_suite, suite_options

    validate_eval_options(split, suite, metadata)  # refused before any weights load
    options = suite_options(suite, ocr_protocol)
    check_limit(limit)
    from jsbench.backbones import backbone_class
    from jsbench.suites import preflight

    preflight(suite, backbone_class(backbone))  # what the suite cannot score (ocr without text, hpdv2 without HPSv2)
    prompt_list = read_prompts_file(prompts_file) if prompts_file is not None else None  # refuse before loading weights
    ctx = get_context()
    bb = _backbone(backbone, model, pick_device(device, dist=ctx), dtype, offload_mode or offload, decode_chunk, progress, guidance)  # one accelerator per process
    s = load_suite(suite, bb, **options, **({"metadata": str(metadata)} if metadata is not None else {}))
    items = items_for_prompts(s, prompt_list, prompts_file) if prompt_list is not None else None
    if limit is not None:
        items = first_per_task(items if items is not None else s.items(split), limit)
    seeds = default_seeds(suite, is_real(bb)) if seeds is None else seeds  # 0 is refused by evaluate, in one line
    source = resolve_schedule(schedule, bb, steps, suite=s, log=lambda m: err.print(m, highlight=False, soft_wrap=True))
    _, records = run_eval(bb, s, source, out, seeds_per_prompt=seeds, split=split, items=items, batch_size=batch_size, progress=progress, ctx=ctx,
                          seed_base=seed_base, save_images=save_images)
    if ctx.is_main:  # rank 0 writes the records once
        from jsbench import tables

        if fmt != OutputFormat.table:  # every record field, exact
            sys.stdout.write(tables.records_text(fmt.value, records))
        else:
            console.print(tables.eval_table(records, suite, bb.name, source))
    ctx.close()  # every process leaves the group together, once rank 0 has written


# CompareRequest's fields in --help's panels (a new field lands under "Options" until named here)
_COMPARE_PANELS = {
    **dict.fromkeys(("suite", "steps", "seeds", "seed_base", "policies", "all_runs", "schedule", "zoo", "ocr_protocol", "distilled", "limit",
                     "processes"), RUN),
    **dict.fromkeys(("backbone", "model", "device", "batch_size", "dtype", "offload", "decode_chunk", "guidance", "offload_mode"), BACKBONE),
    **dict.fromkeys(("records", "leaderboards", "plots", "progress", "format", "tasks", "save_images"), OUT),
    **dict.fromkeys(("check", "report", "strict", "tolerance"), CHECK),
    **dict.fromkeys(("plan", "gpu"), PLAN),
}


def _compare_signature() -> inspect.Signature:
    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    return inspect.Signature([context, *config_options(CompareRequest, _COMPARE_PANELS)])


def compare(ctx: typer.Context, **fields):
    """Evaluate default, zoo, shipped policies and the ceiling; write leaderboards/.

    Outside a project (no policies/ or leaderboards/ here or above) it writes
    ./leaderboards; --check reads the installed checkout's. Exit codes: 0 ok,
    1 a row regressed (--check; with --strict also a missing row), 2 refused."""
    from jsbench.compare_runs import run_command

    try:
        from typer._click.core import ParameterSource
    except ImportError:  # typer on the click package
        from click.core import ParameterSource
    request = CompareRequest(**{k: v.value if isinstance(v, Enum) else v for k, v in fields.items()})
    given = [n for n in ctx.params if ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE]  # --all refuses per-run ones
    raise typer.Exit(run_command(request, given=given, command_line=_command_line(), out=console, err=err))


compare.__signature__ = _compare_signature()  # typer reads the options from it
app.command()(compare)


def _command_line() -> str:
    """This process's jsbench command line, as a plan names it."""
    import shlex

    return "jsbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@app.command()
def estimators(
    backbone: Optional[str] = typer.Option(None, help="Backbone name (default analytic; with --all: only its rows)."),
    model: Optional[str] = _backbone_option("model"),
    steps: int = typer.Option(3, help="Step budget."),
    contexts: int = typer.Option(16, "--contexts", "-B", help="Contexts B per rollout."),
    samples: int = typer.Option(2, "--samples", "-K", help="Schedules K per context."),
    rollouts: int = typer.Option(200, help="Independent rollouts R."),
    seed: int = typer.Option(0, help="Seed of the rollouts and the bootstrap."),
    reward: str = typer.Option("geneval", help="Reward."),
    suite: str = typer.Option("geneval", help="Suite whose training prompts are used."),
    policy: Optional[Path] = typer.Option(None, help="Policy folder, or a row folder with seed<S>/ (seed0 used); default: untrained."),
    mean_rollouts: int = typer.Option(50, help="Rollouts that also get extra samples for the baseline MSE."),
    mean_samples: int = typer.Option(8, help="Extra samples M per context for its mean."),
    bootstrap: int = typer.Option(2000, help="Bootstrap resamples of the 90% CIs."),
    run: Optional[Path] = typer.Option(None, help="A training run folder: measure along it (replayed)."),
    every: int = typer.Option(50, help="With --run: updates between measurements."),
    out: Optional[Path] = typer.Option(None, help="Also write the record (JSON; with --run, and a figure beside it)."),
    all_: bool = typer.Option(False, "--all", help="Regenerate leaderboards/estimators.md|csv (or --check it)."),
    check: bool = typer.Option(False, help="With --all: re-measure, compare with the committed csv (exit 1 if not equal)."),
    leaderboards: Optional[Path] = typer.Option(None, help="With --all: folder of estimators.md|csv."),
    policies: Optional[Path] = typer.Option(None, help="With --all: folder of <backbone>/rloo-n<steps>."),
    device: Optional[str] = _backbone_option("device"),
    dtype: Optional[str] = _backbone_option("dtype"),
    batch_size: Optional[int] = _backbone_option("batch_size"),
    progress: bool = _backbone_option("progress"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=FORMAT_HELP),
    processes: int = typer.Option(1, "--processes", min=1, help="Split each rollout's contexts over N local processes (torchrun)."),
):
    """Gradient variance, gradient MSE and baseline MSE of every baseline, paired, relative to rloo."""
    if processes > 1:
        from jsbench.distributed import launch_processes

        raise typer.Exit(launch_processes(processes))
    from jsbench import estimators as lab
    from jsbench.workspace import project_dir

    if all_:
        code = lab.estimators_section(leaderboards or project_dir("leaderboards"), policies or project_dir("policies"),
                                      check=check, progress=progress, log=lambda m: err.print(m, highlight=False, soft_wrap=True),
                                      backbones=[backbone] if backbone else None)
        raise typer.Exit(code)
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

    bb = _backbone(backbone, model, pick_device(device, dist=ctx), dtype, progress=progress)  # one accelerator per process
    if run is not None:
        record = lab.run_lab_along(config, run, every, backbone=bb, progress=progress, dist=ctx)
    else:
        record = lab.run_lab(config, backbone=bb, progress=progress, dist=ctx)
    if ctx.is_main:
        if out is not None:
            for path in lab.write_lab_record(record, out):
                err.print(f"wrote {path}", highlight=False)
        if fmt == OutputFormat.json:
            import json

            sys.stdout.write(json.dumps(record, indent=1) + "\n")
        elif fmt == OutputFormat.csv:
            sys.stdout.write(lab.lab_csv(record))
        else:
            sys.stdout.write(lab.lab_text(record))
    ctx.close()


@app.command()
def prompts(
    suite: str = typer.Option("geneval", help="Suite."),
    backbone: str = typer.Option("analytic", help="Backbone whose suite prompts are listed (analytic draws the embedded world's)."),
    split: str = typer.Option("test", help="test, train or all."),
    fmt: str = typer.Option("tsv", "--format", help="tsv: task<TAB>prompt; jsonl: one json.dumps(metadata) a line (for --suite geneval on a real backbone, GenEval's evaluation_metadata.jsonl byte for byte)."),
):
    """Print a suite's prompts. Loads no model weights: the backbone is only asked whether it draws the embedded world."""
    from jsbench.suites import load_suite

    if fmt not in ("tsv", "jsonl"):
        raise JsbenchError(f"unknown --format {fmt!r}: use tsv or jsonl")
    from jsbench.backbones import listing_backbone

    s = load_suite(suite, listing_backbone(backbone) or _backbone(backbone, None, None))  # no weights where the class says enough
    items = s.items(split)
    if fmt == "jsonl":
        from jsbench.scoring.geneval_prompts import metadata_jsonl

        sys.stdout.write(metadata_jsonl(it.entry() for it in items))
        return
    for it in items:
        typer.echo(f"{it.task}\t{it.prompt}")


@app.command()
def plugins():
    """List every backbone, suite, schedule source and baseline, and where each comes from (jsbench or a plugin's
    package; docs/plugins.md). Exits 1 if a plugin does not load, naming it."""
    from jsbench.plugins import listing, registered

    rows, problems = registered()
    sys.stdout.write(listing(rows, problems))
    if problems:
        raise typer.Exit(1)


@schedules_app.command("plot")
def schedules_plot(
    schedule: List[str] = typer.Option(["default"], help="Schedule sources to plot (default, policy:PATH, shift:S, ...); repeat."),
    suite: str = typer.Option("geneval", help="Suite whose held-out prompts are plotted (one per task)."),
    backbone: str = typer.Option("analytic", help="Backbone name."),
    model: Optional[str] = _backbone_option("model"),
    steps: int = typer.Option(5, help="Step budget of the plotted schedules (a policy must be trained for it)."),
    seeds: int = typer.Option(4, help="Seeds per prompt for the spread panel."),
    out: Path = typer.Option(Path("figures"), help="Output folder for schedules.png and images.png."),
    device: Optional[str] = _backbone_option("device"),
):
    """Plot schedules (per prompt, and their spread over prompts x seeds) and an image grid per source."""
    from jsbench.evaluate import resolve_schedule
    from jsbench.compare import suite_verdicts
    from jsbench.plots import plot_image_grid, plot_schedules
    from jsbench.suites import load_suite

    _check_outputs(out_folder=out)
    _check_device(device)
    bb = _backbone(backbone, model, device)
    s = load_suite(suite, bb)
    sources = [resolve_schedule(spec, bb, steps, suite=s) for spec in schedule]
    prompts = list({it.task: it.prompt for it in s.items("test")}.values())[:6]
    for path in (
        plot_schedules(bb, sources, prompts, list(range(seeds)), out / "schedules.png", title=f"{bb.name} · {steps} steps · schedules"),
        plot_image_grid(bb, sources, prompts, 0, out / "images.png", suite_verdicts(s, s.items("test")), title=f"{bb.name} · {steps} steps"),
    ):
        console.print(f"wrote {path}")


@schedules_app.command("export")
def schedules_export(
    schedule: str = typer.Option("default", help="Schedule source: default, policy:PATH, a zoo row (karras, oss, ...), file:PATH, shift:S."),
    suite: str = typer.Option("geneval", help="Suite whose prompts are exported (unless --prompts-file)."),
    backbone: str = typer.Option("analytic", help="Backbone name."),
    model: Optional[str] = _backbone_option("model"),
    steps: int = typer.Option(5, help="Step budget."),
    seeds: int = typer.Option(1, help="Images per prompt (eval's images 0, 1, ...; each one's seed is printed)."),
    split: str = typer.Option("test", help="Prompt split: test, train or all."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N prompts of each task."),
    prompts_file: Optional[Path] = typer.Option(None, "--prompts-file", help="UTF-8 file, one prompt of the suite a line."),
    device: Optional[str] = _backbone_option("device"),
    dtype: Optional[str] = _backbone_option("dtype"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table: seed, prompt, sigmas a line; json: {\"sigmas\": [[...], ...], ...}."),
):
    """Print per-image sigmas to pass to a diffusers pipeline's `sigmas=` (with latents from the same seed)."""
    from jsbench.evaluate import EVAL_SEED_BASE, items_for_prompts, read_prompts_file, resolve_schedule
    from jsbench.export import export_schedules, export_text
    from jsbench.protocol import check_limit, first_per_task
    from jsbench.suites import load_suite

    if fmt == OutputFormat.csv:
        raise JsbenchError("schedules export prints --format table or json")
    if seeds < 1:
        raise JsbenchError(f"--seeds must be at least 1, got {seeds}")
    check_limit(limit)
    prompt_list = read_prompts_file(prompts_file) if prompts_file is not None else None
    bb = _backbone(backbone, model, device, dtype, progress=False)
    s = load_suite(suite, bb)
    items = items_for_prompts(s, prompt_list, prompts_file) if prompt_list is not None else s.items(split)
    items = first_per_task(items, limit)
    source = resolve_schedule(schedule, bb, steps, suite=s, log=lambda m: err.print(m, highlight=False, soft_wrap=True))
    data = export_schedules(bb, source, [it.prompt for it in items], list(range(EVAL_SEED_BASE, EVAL_SEED_BASE + seeds)))
    sys.stdout.write(export_text(data, fmt.value))


@policies_app.command("list")
def policies_list(
    root: Optional[Path] = typer.Option(None, help="Folder to search (default: policies/ of the project root, " + _ROOT_HELP + ")."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=FORMAT_HELP),
):
    """Every policy under ROOT with its backbone, steps, kind, baseline and reward."""
    from jsbench import tables
    from jsbench.policy import list_policies
    from jsbench.workspace import display_path, project_dir

    root = root or project_dir("policies")
    rows = list_policies(root)
    if fmt != OutputFormat.table:
        sys.stdout.write(tables.rows_text(fmt.value, tables.POLICY_COLUMNS, rows))
        return
    console.print(tables.policies_table(rows, display_path(root)))


class SizeFormat(str, Enum):
    table = "table"
    json = "json"


@policies_app.command("size")
def policies_size(
    backbone: str = typer.Option(..., help="A real backbone: sdxl, sd35-medium, sd35-large, flux-dev, flux-schnell."),
    steps: Optional[int] = typer.Option(None, min=1, help="Step budget N (default: the backbone's default steps)."),
    policy_arch: str = typer.Option("auto", help="auto (what train builds), small or xattn."),
    fmt: SizeFormat = typer.Option(SizeFormat.table, "--format", help="table or json."),
):
    """The policy train builds for BACKBONE at full size (1024^2): parameters, inputs and FLOPs next to sampling.

    Built on the meta device from the published shapes: no weights are read."""
    import json

    from jsbench.backbones.full_size import component_sizes
    from jsbench.policy_size import full_size_name, policy_size

    row = policy_size(backbone, steps, policy_arch)
    row["backbone_params"] = component_sizes(full_size_name(backbone))  # the full-size pipeline's weights beside the policy
    if fmt == SizeFormat.json:
        sys.stdout.write(json.dumps(row) + "\n")
        return
    sizes = row["backbone_params"]
    count = lambda n: f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"  # noqa: E731
    encoders = ", ".join(f"{name} {count(n)}" for name, n in sizes["text_encoders"].items())
    console.print(f"{row['backbone']} at {row['steps']} steps, arch {row['arch']} (width {row['width']}, depth {row['depth']})")
    console.print(f"  parameters     {row['params'] / 1e6:.2f}M")
    console.print(f"  reads          {', '.join(row['reads'])}")
    console.print(f"  GFLOPs per row {row['gflops_per_row']:.2f}  ({100 * row['sampler_share']:.4f}% of one sampling)")
    console.print(f"  backbone       denoiser {count(sizes['denoiser'])}, VAE {count(sizes['vae'])}")
    console.print(f"  text encoders  {encoders}")


@policies_app.command("show")
def policies_show(path: Path = typer.Argument(..., help="Policy folder.")):
    """A policy's manifest, verified against its weights."""
    import json

    from jsbench.policy import load_policy

    _, manifest = load_policy(path)
    console.print_json(json.dumps(manifest))


@detectors_app.command("convert-mmdet")
def detectors_convert_mmdet(
    checkpoint: Path = typer.Argument(..., help="GenEval's mmdet Mask2Former checkpoint (.pth)."),
    out: Path = typer.Argument(..., help="New folder for the transformers weights."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a non-empty OUT."),
):
    """Convert GenEval's mmdet Mask2Former checkpoint to a transformers folder (no mmdet needed); then
    score with JSBENCH_GENEVAL_OFFICIAL=OUT (or JSBENCH_GENEVAL_DETECTOR=geneval-official:OUT)."""
    from jsbench.rewards.mmdet_convert import PROVENANCE_FILE, convert_mmdet_checkpoint

    folder = convert_mmdet_checkpoint(checkpoint, out, overwrite=overwrite)
    console.print(f"wrote {folder} (source sha256 in {PROVENANCE_FILE})", highlight=False)


EXIT_REFUSED, EXIT_INTERNAL = 2, 3  # 0 ok; 1 only "regressed" (compare --check); 130 interrupted (Ctrl-C)
EXIT_PIPE_CLOSED = 141  # the reader of stdout went away (`| head`): what a shell reports for SIGPIPE


def _refuse(message: str) -> None:
    from rich.markup import escape

    # soft_wrap: the refusal stays ONE line in logs and narrow terminals (rich hard-wraps otherwise)
    err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(EXIT_REFUSED)


def main() -> None:
    """The entry point: a refusal (`JsbenchError`, or the system refusing a read or write: disk full,
    read-only, missing) is one line and exit 2; anything else is a bug, shown with its traceback, exit 3;
    a closed stdout pipe exits 141; so exit 1 always means a check found a regression."""
    from jsbench.host_memory import retain_freed_host_memory

    retain_freed_host_memory()  # CPU sampling: freed activations are reused, not page-faulted in afresh
    try:
        app(standalone_mode=True)
    except SystemExit as exc:
        # typer ends a command whose stdout was closed (`jsbench ... | head`) with exit 1, after putting a
        # PacifyFlushWrapper on stdout; 1 must only mean "regressed"
        if exc.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            sys.exit(EXIT_PIPE_CLOSED)
        raise
    except JsbenchError as exc:
        _refuse(str(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _refuse(f"{where}{exc.strerror or exc}")
    except Exception:
        import traceback

        traceback.print_exc()
        err.print("[red]error:[/] internal error (a bug in jsbench; please report it with the traceback above)", highlight=False, soft_wrap=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()

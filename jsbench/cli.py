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
from jsbench.cli_options import (BACKBONE, CHECK, OPTIMIZER, OUT, PLAN, ROOT_HELP, RUN, TRAINING, OutputFormat, SizeFormat, backbone_option,
                                 config_options, keyword_option, show_flags_bare)
from jsbench.zoo.registry import spec_syntax  # the schedule sources' declarations: imports no torch
from jsbench.train.config import TrainConfig  # dataclasses only: --help stays fast
from jsbench.report.compare_request import (BACKBONE_HELP, FORMAT_HELP, GPU_HELP, LIMIT_HELP, OCR_PROTOCOL_HELP, PLAN_HELP,  # likewise
                                     PROGRESS_HELP, SAVE_HELP, SEED_BASE_HELP, SEEDS_HELP, SUITE_HELP, CompareRequest)

show_flags_bare()

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


def _exit(code: int) -> None:
    """A command body's exit code, as typer ends with it (0: the command simply returns)."""
    if code:
        raise typer.Exit(code)


# train's own options, around the TrainConfig fields: (placed after this field, or first / last)
_TRAIN_OPTIONS = {
    "first": [keyword_option("out", Optional[Path], typer.Option(None, help="Run folder OUT (see above).", rich_help_panel=RUN))],
    "checkpoint_every": [
        keyword_option("resume", bool, typer.Option(False, help="Continue exactly from OUT.", rich_help_panel=RUN)),
        keyword_option("overwrite", bool, typer.Option(False, "--overwrite", help="Replace the run in OUT.", rich_help_panel=RUN)),
    ],
    "last": [
        keyword_option("progress", bool, typer.Option(True, help=PROGRESS_HELP, rich_help_panel=RUN)),
        keyword_option("processes", int, typer.Option(1, "--processes", min=1, help="Local processes (torchrun).", rich_help_panel=RUN)),
        keyword_option("plan", bool, typer.Option(False, "--plan", help=PLAN_HELP, rich_help_panel=PLAN)),
        keyword_option("gpu", str, typer.Option("h100", "--gpu", help=GPU_HELP, rich_help_panel=PLAN)),
    ],
}
# TrainConfig's fields in --help's panels (a new field lands under "Options" until named here; --ocr-protocol
# stays there, beside the held-out options whose scores it sets)
_TRAIN_PANELS = {
    "threads": RUN,  # main's TrainConfig.threads
    **dict.fromkeys(("recipe", "steps", "policy", "baseline", "reward", "suite", "prompts_file", "iters", "contexts", "samples", "seed",
                     "checkpoint_every"), TRAINING),
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
    from jsbench.commands.train import run_train

    _exit(run_train(fields, out=out, resume=resume, overwrite=overwrite, progress=progress, processes=processes, plan=plan, gpu=gpu,
                    console=console, err=err))


train.__signature__ = _train_signature()  # typer reads the options from it
app.command()(train)


@app.command("eval")
def eval_(
    suite: str = typer.Option("geneval", help=SUITE_HELP, rich_help_panel=RUN),
    backbone: str = typer.Option("analytic", help=BACKBONE_HELP, rich_help_panel=BACKBONE),
    model: Optional[str] = backbone_option("model"),
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
    batch_size: Optional[int] = backbone_option("batch_size"),
    device: Optional[str] = backbone_option("device"),
    dtype: Optional[str] = backbone_option("dtype"),
    offload: bool = backbone_option("offload"),
    decode_chunk: Optional[int] = backbone_option("decode_chunk"),
    guidance: Optional[float] = backbone_option("guidance"),
    offload_mode: Optional[str] = backbone_option("offload_mode"),
    progress: bool = backbone_option("progress"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=FORMAT_HELP, rich_help_panel=OUT),
    processes: int = typer.Option(1, "--processes", min=1, help="Shard prompts over N local processes.", rich_help_panel=RUN),
    limit: Optional[int] = typer.Option(None, "--limit", help=LIMIT_HELP, rich_help_panel=RUN),
    save_images: Optional[Path] = typer.Option(None, "--save-images", help=SAVE_HELP, rich_help_panel=OUT),
    plan: bool = typer.Option(False, "--plan", help=PLAN_HELP, rich_help_panel=PLAN),
    gpu: str = typer.Option("h100", "--gpu", help=GPU_HELP, rich_help_panel=PLAN),
):
    """Evaluate one schedule on a suite and append its records."""
    options = dict(locals())
    from jsbench.commands.eval import run_eval_command

    _exit(run_eval_command(**options, console=console, err=err))


# CompareRequest's fields in --help's panels (a new field lands under "Options" until named here)
_COMPARE_PANELS = {
    **dict.fromkeys(("suite", "steps", "seeds", "seed_base", "policies", "all_runs", "schedule", "zoo", "ocr_protocol", "distilled", "limit",
                     "processes"), RUN),
    **dict.fromkeys(("backbone", "model", "device", "batch_size", "dtype", "offload", "decode_chunk", "guidance", "offload_mode"), BACKBONE),
    **dict.fromkeys(("records", "leaderboards", "plots", "progress", "format", "tasks", "save_images"), OUT),
    **dict.fromkeys(("check", "report", "strict", "tolerance", "reread"), CHECK),
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
    from jsbench.commands.common import command_line
    from jsbench.commands.compare import run_command

    try:
        from typer._click.core import ParameterSource
    except ImportError:  # typer on the click package
        from click.core import ParameterSource
    request = CompareRequest(**{k: v.value if isinstance(v, Enum) else v for k, v in fields.items()})
    given = [n for n in ctx.params if ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE]  # --all refuses per-run ones
    raise typer.Exit(run_command(request, given=given, command_line=command_line(), out=console, err=err))


compare.__signature__ = _compare_signature()  # typer reads the options from it
app.command()(compare)


@app.command()
def estimators(
    backbone: Optional[str] = typer.Option(None, help="Backbone name (default analytic; with --all: only its rows)."),
    model: Optional[str] = backbone_option("model"),
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
    device: Optional[str] = backbone_option("device"),
    dtype: Optional[str] = backbone_option("dtype"),
    batch_size: Optional[int] = backbone_option("batch_size"),
    progress: bool = backbone_option("progress"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=FORMAT_HELP),
    processes: int = typer.Option(1, "--processes", min=1, help="Split each rollout's contexts over N local processes (torchrun)."),
):
    """Gradient variance, gradient MSE and baseline MSE of every baseline, paired, relative to rloo."""
    options = dict(locals())
    from jsbench.commands.estimators import run_estimators

    _exit(run_estimators(**options, err=err))


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
    from jsbench.commands.common import load_backbone_quietly

    s = load_suite(suite, listing_backbone(backbone) or load_backbone_quietly(backbone, None, None))  # no weights where the class says enough
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
    model: Optional[str] = backbone_option("model"),
    steps: int = typer.Option(5, help="Step budget of the plotted schedules (a policy must be trained for it)."),
    seeds: int = typer.Option(4, help="Seeds per prompt for the spread panel."),
    out: Path = typer.Option(Path("figures"), help="Output folder for schedules.png and images.png."),
    device: Optional[str] = backbone_option("device"),
):
    """Plot schedules (per prompt, and their spread over prompts x seeds) and an image grid per source."""
    options = dict(locals())
    from jsbench.commands.schedules import plot_schedules_command

    _exit(plot_schedules_command(**options, console=console))


@schedules_app.command("export")
def schedules_export(
    schedule: str = typer.Option("default", help="Schedule source: default, policy:PATH, a zoo row (karras, oss, ...), file:PATH, shift:S."),
    suite: str = typer.Option("geneval", help="Suite whose prompts are exported (unless --prompts-file)."),
    backbone: str = typer.Option("analytic", help="Backbone name."),
    model: Optional[str] = backbone_option("model"),
    steps: int = typer.Option(5, help="Step budget."),
    seeds: int = typer.Option(1, help="Images per prompt (eval's images 0, 1, ...; each one's seed is printed)."),
    split: str = typer.Option("test", help="Prompt split: test, train or all."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N prompts of each task."),
    prompts_file: Optional[Path] = typer.Option(None, "--prompts-file", help="UTF-8 file, one prompt of the suite a line."),
    device: Optional[str] = backbone_option("device"),
    dtype: Optional[str] = backbone_option("dtype"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table: seed, prompt, sigmas a line; json: {\"sigmas\": [[...], ...], ...}."),
):
    """Print per-image sigmas to pass to a diffusers pipeline's `sigmas=` (with latents from the same seed)."""
    options = dict(locals())
    from jsbench.commands.schedules import export_schedules_command

    _exit(export_schedules_command(**options, err=err))


@policies_app.command("list")
def policies_list(
    root: Optional[Path] = typer.Option(None, help="Folder to search (default: policies/ of the project root, " + ROOT_HELP + ")."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=FORMAT_HELP),
):
    """Every policy under ROOT with its backbone, steps, kind, baseline and reward."""
    from jsbench.commands.policies import list_policies_command

    _exit(list_policies_command(root=root, fmt=fmt, console=console))


@policies_app.command("size")
def policies_size(
    backbone: str = typer.Option(..., help="A real backbone: sdxl, sd35-medium, sd35-large, flux-dev, flux-schnell."),
    steps: Optional[int] = typer.Option(None, min=1, help="Step budget N (default: the backbone's default steps)."),
    policy_arch: str = typer.Option("auto", help="auto (what train builds), small or xattn."),
    fmt: SizeFormat = typer.Option(SizeFormat.table, "--format", help="table or json."),
):
    """The policy train builds for BACKBONE at full size (1024^2): parameters, inputs and FLOPs next to sampling.

    Built on the meta device from the published shapes: no weights are read."""
    from jsbench.commands.policies import policy_size_command

    _exit(policy_size_command(backbone=backbone, steps=steps, policy_arch=policy_arch, fmt=fmt, console=console))


@policies_app.command("show")
def policies_show(path: Path = typer.Argument(..., help="Policy folder.")):
    """A policy's manifest, verified against its weights."""
    from jsbench.commands.policies import show_policy_command

    _exit(show_policy_command(path=path, console=console))


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

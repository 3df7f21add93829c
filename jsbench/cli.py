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
from jsbench.suites import declared_suites  # the declared names only: imports no suite module
from jsbench.train_config import DECODE_HELP, DEVICE_HELP, DTYPE_HELP, GUIDANCE_HELP, MODEL_HELP, OFFLOAD_HELP, OFFLOAD_MODE_HELP, TrainConfig  # dataclasses only: --help stays fast

def _no_bool_tag() -> None:
    """typer's rich help tags every option with its type, flags (`--resume/--no-resume`, `--help`) as `<bool>`,
    though a flag takes no value; show flags bare, as its plain-text help does."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_jsbench", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag and not self.count else shown(self, ctx)

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
schedules_app = typer.Typer(no_args_is_help=True, help="Look at schedules: plot default vs learned schedules.")
app.add_typer(schedules_app, name="schedules")
console = Console()
err = Console(stderr=True)


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


_FORMAT_HELP = "table: for reading, fits 80 columns; csv or json: every value exact, for piping."
_PROGRESS_HELP = "Show a progress bar (on stderr) and the model-loading messages; --no-progress silences both."
_ROOT_HELP = "the nearest folder at or above the current one holding policies/ or leaderboards/, else the checkout jsbench is installed from"


def _backbone(name: str, model: Optional[str], device: Optional[str], dtype: Optional[str] = None, offload: bool | str = False,
              decode_chunk: Optional[int] = None, progress: bool = True, guidance: Optional[float] = None, share_with=None):
    from jsbench.backbones import load_backbone
    from jsbench.progress import quiet_model_loading

    quiet_model_loading(show_bars=progress)  # --no-progress also hides the libraries' loading bars

    return load_backbone(name, model, device, dtype=dtype, offload=offload, decode_chunk=decode_chunk, guidance=guidance,
                         share_with=share_with)


# the backbone options of eval, compare and schedules plot, declared once: name -> typer.Option's arguments (the
# dtype, offload and decode-chunk helps are also those of train's TrainConfig fields)
_BACKBONE_OPTIONS = {
    "model": dict(default=None, help=MODEL_HELP),
    "batch_size": dict(default=None, flags=("--batch-size",), min=1, help="Images sampled per batch (default: the backbone's eval batch)."),
    "device": dict(default=None, help=DEVICE_HELP),
    "dtype": dict(default=None, help=DTYPE_HELP),
    "offload": dict(default=False, flags=("--offload",), help=OFFLOAD_HELP),
    "decode_chunk": dict(default=None, flags=("--decode-chunk",), min=1, help=DECODE_HELP),
    "guidance": dict(default=None, help=GUIDANCE_HELP),
    "offload_mode": dict(default=None, flags=("--offload-mode",), help=OFFLOAD_MODE_HELP),
    "progress": dict(default=True, help=_PROGRESS_HELP),
}


def _backbone_option(name: str, **override):
    """A new typer.Option for backbone option `name` (each command gets its own), `override` replacing its arguments."""
    spec = {**_BACKBONE_OPTIONS[name], **override}
    return typer.Option(spec.pop("default"), *spec.pop("flags", ()), **spec)


def config_options(config_cls) -> list[inspect.Parameter]:
    """A typer option per field of a config dataclass, built from the field's metadata (see
    jsbench/train_config.py): `help` (required), `flags` (default --field-name), `choices` (an enum of
    the values, whose `.value` the command passes on), `min`. The field's default is the option's."""
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
        extra = {"min": meta["min"]} if "min" in meta else {}
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                     default=typer.Option(default, *meta.get("flags", ()), help=meta["help"], **extra)))
    return out


def _option(name: str, annotation, default) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


# train's own options, around the TrainConfig fields: (placed after this field, or first / last)
_TRAIN_OPTIONS = {
    "first": [_option("out", Path, typer.Option(..., help="Folder for the policy, its checkpoint and training log."))],
    "checkpoint_every": [
        _option("resume", bool, typer.Option(False, help="Continue from OUT/checkpoint.pt; ends exactly where the uninterrupted run would.")),
        _option("overwrite", bool, typer.Option(False, "--overwrite", help="Replace the policy, checkpoint and log already in OUT (refused otherwise).")),
    ],
    "last": [
        _option("progress", bool, typer.Option(True, help="Show a progress bar.")),
        _option("processes", int, typer.Option(1, "--processes", min=1, help="Split each update's contexts over N local processes (runs torchrun; needs accelerate). For GPUs and nodes use `accelerate launch -m jsbench train ...`.")),
    ],
}


def _train_signature() -> inspect.Signature:
    params = list(_TRAIN_OPTIONS["first"])
    for p in config_options(TrainConfig):
        params += [p, *_TRAIN_OPTIONS.get(p.name, [])]
    return inspect.Signature(params + _TRAIN_OPTIONS["last"])


def train(*, out: Path, resume: bool, overwrite: bool, progress: bool, processes: int, **fields):
    """Train a schedule policy with REINFORCE and a reward baseline (default js, James–Stein); writes OUT/policy.safetensors + manifest.json.

    OUT is locked while the run writes it (a second run on the same OUT refuses), and a folder that already
    holds a policy or a run is refused unless --resume or --overwrite says what to do with it."""
    if processes > 1:
        from jsbench.distributed import launch_processes

        raise typer.Exit(launch_processes(processes))
    from jsbench.train import Trainer

    config = TrainConfig(**{k: v.value if isinstance(v, Enum) else v for k, v in fields.items()})
    import contextlib

    from jsbench.distributed import get_context
    from jsbench.workspace import clear_run, output_lock, refuse_to_replace

    refuse_to_replace(out, resume, overwrite)  # before the lock: a refused folder is left exactly as it was
    from jsbench.progress import quiet_model_loading

    quiet_model_loading(show_bars=progress)
    with output_lock(out, "jsbench train") if get_context().is_main else contextlib.nullcontext():  # rank 0 writes OUT
        refuse_to_replace(out, resume, overwrite)  # again, now that no other run can write OUT
        trainer = Trainer(config, out)
        if resume:
            trainer.resume()
        elif overwrite and trainer.dist.is_main:
            clear_run(out)
        trainer.train(progress=progress)
        path = trainer.save_policy()
    if trainer.dist.is_main:
        console.print(f"policy written to [bold]{path}[/]")
    trainer.dist.close()  # every process leaves the group together


train.__signature__ = _train_signature()  # typer reads the options from it
app.command()(train)


@app.command("eval")
def eval_(
    suite: str = typer.Option("geneval", help=f"Suite: {', '.join(declared_suites())}."),
    backbone: str = typer.Option("analytic", help="Backbone name."),
    model: Optional[str] = _backbone_option("model"),
    steps: int = typer.Option(5, help="Step budget."),
    schedule: str = typer.Option("default", help="default | ceiling | uniform | shift:S | policy:PATH | karras[:RHO] | exponential | beta[:A,B] | ays | oss[:M] | oss-mean[:M] | oss-image[:M] | searched | file:PATH (oss and searched are computed once on the training prompts and cached under schedules/)."),
    seeds: int = typer.Option(16, help="Images (seeds) per prompt."),
    split: str = typer.Option("test", help="Prompt split: test (held out), train or all."),
    metadata: Optional[Path] = typer.Option(None, help="GenEval evaluation_metadata.jsonl to evaluate instead of the suite's test prompts (--suite geneval; on analytic, prompts the world draws)."),
    prompts_file: Optional[Path] = typer.Option(None, "--prompts-file", help="UTF-8 text file, one prompt of the suite a line: evaluate these instead of --split."),
    out: Path = typer.Option(Path("results/records.jsonl"), help="Records file (JSONL, appended atomically)."),
    batch_size: Optional[int] = _backbone_option("batch_size"),
    device: Optional[str] = _backbone_option("device"),
    dtype: Optional[str] = _backbone_option("dtype"),
    offload: bool = _backbone_option("offload"),
    decode_chunk: Optional[int] = _backbone_option("decode_chunk"),
    guidance: Optional[float] = _backbone_option("guidance"),
    offload_mode: Optional[str] = _backbone_option("offload_mode"),
    progress: bool = _backbone_option("progress"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=_FORMAT_HELP),
    processes: int = typer.Option(1, "--processes", min=1, help="Shard the prompts over N local processes (runs torchrun; needs accelerate); records are gathered and written once."),
):
    """Evaluate one schedule on a suite and append its records."""
    if processes > 1:
        from jsbench.distributed import launch_processes

        raise typer.Exit(launch_processes(processes))
    from jsbench.devices import pick_device
    from jsbench.distributed import get_context
    from jsbench.evaluate import items_for_prompts, read_prompts_file, resolve_schedule
    from jsbench.runs import run_eval, validate_eval_options
    from jsbench.suites import load_suite

    validate_eval_options(split, suite, metadata)  # refused before any weights load
    prompt_list = read_prompts_file(prompts_file) if prompts_file is not None else None  # refuse before loading weights
    ctx = get_context()
    bb = _backbone(backbone, model, pick_device(device, dist=ctx), dtype, offload_mode or offload, decode_chunk, progress, guidance)  # one accelerator per process
    s = load_suite(suite, bb, **({"metadata": str(metadata)} if metadata is not None else {}))
    items = items_for_prompts(s, prompt_list, prompts_file) if prompt_list is not None else None
    source = resolve_schedule(schedule, bb, steps, suite=s, log=lambda m: err.print(m, highlight=False, soft_wrap=True))
    _, records = run_eval(bb, s, source, out, seeds_per_prompt=seeds, split=split, items=items, batch_size=batch_size, progress=progress, ctx=ctx)
    if ctx.is_main:  # rank 0 writes the records once
        from jsbench import tables

        if fmt != OutputFormat.table:  # every record field, exact
            sys.stdout.write(tables.records_text(fmt.value, records))
        else:
            console.print(tables.eval_table(records, suite, bb.name, source))
    ctx.close()  # every process leaves the group together, once rank 0 has written


@app.command()
def compare(
    ctx: typer.Context,
    suite: str = typer.Option("geneval", help="Suite to compare on."),
    backbone: str = typer.Option("analytic", help="Backbone name."),
    model: Optional[str] = _backbone_option("model"),
    steps: List[int] = typer.Option([3, 5], help="Step budgets (repeat the option for several)."),
    seeds: int = typer.Option(16, help="Images (seeds) per prompt."),
    policies: Optional[Path] = typer.Option(None, help="Folder of policies, <backbone>/<name>/ inside (default: policies/ of the project root, " + _ROOT_HELP + ")."),
    records: Path = typer.Option(Path("results/records.jsonl"), help="Records file to append to."),
    leaderboards: Optional[Path] = typer.Option(None, help="Folder of <suite>.md, <suite>.csv and recipe.json (default: leaderboards/ of the project root, " + _ROOT_HELP + "). A run replaces the sections it evaluates and keeps the others."),
    all_: bool = typer.Option(False, "--all", help="Run every compare invocation listed in LEADERBOARDS/recipe.json: regenerates (or, with --check, checks) every committed section and figure."),
    schedule: List[str] = typer.Option([], help="Extra schedule rows, e.g. --schedule shift:3 --schedule uniform."),
    zoo: str = typer.Option("karras,ays,oss,oss-image,searched", help="Zoo rows beside default, comma-separated, or none: karras[:RHO], exponential, beta[:A,B], ays, oss[:M], oss-mean[:M], oss-image[:M], searched (where the backbone has them; oss-image by default only on the embedded worlds)"),
    distilled: List[str] = typer.Option([], help="Distilled sampler rows at their own default budget: NAME or NAME=MODEL, e.g. --distilled flux-schnell."),
    check: bool = typer.Option(False, help="Do not write the leaderboard; check every committed row and task against this run (exit 1 if one regressed)."),
    report: List[Path] = typer.Option([], help="With --check: write the report to PATH, format from the suffix: .md (CI job summary), .json, .xml (JUnit); repeat for several."),
    strict: bool = typer.Option(False, help="With --check: a committed row this run does not produce (missing) fails the check too."),
    plots: bool = typer.Option(True, help="Write schedule, image-grid and training-curve figures beside the tables (with --check --report: into figures/ beside the first report)."),
    tolerance: float = typer.Option(2.0, help="With --check: allowed drop, in standard errors of the paired difference (same prompts and seeds)."),
    device: Optional[str] = _backbone_option("device"),
    batch_size: Optional[int] = _backbone_option("batch_size", help="Images sampled per batch (default: each backbone's eval batch)."),
    dtype: Optional[str] = _backbone_option("dtype"),
    offload: bool = _backbone_option("offload"),
    decode_chunk: Optional[int] = _backbone_option("decode_chunk"),
    guidance: Optional[float] = _backbone_option("guidance"),
    offload_mode: Optional[str] = _backbone_option("offload_mode"),
    progress: bool = _backbone_option("progress"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=_FORMAT_HELP),
    tasks: bool = typer.Option(False, "--tasks", help="Add a column per task to the terminal table (wide: more than 80 columns)."),
):
    """Evaluate default, shipped policies and the ceiling; write leaderboards/<suite>.md|csv (or --check them).

    With --check, exit codes: 0 nothing regressed, 1 a row or task regressed (or, with --strict, a committed
    row is missing), 2 refused (bad input, e.g. no committed leaderboard or an unknown --report suffix)."""
    from jsbench.compare import RECIPE_NAME, compare_command, run_compare, validate_compare_options
    from jsbench.suites import load_suite
    from jsbench.workspace import project_dir

    policies = policies or project_dir("policies")
    leaderboards = leaderboards or project_dir("leaderboards")
    if all_:
        _compare_all(ctx, compare, leaderboards / RECIPE_NAME, policies=policies, leaderboards=leaderboards)
        return
    from jsbench.zoo import parse_zoo

    from jsbench.backbones import backbone_class

    # refused before any weights load; the check's scope by the backbone's name (its class's) and the budgets
    validate_compare_options(check, strict, list(report), leaderboards, suite, tolerance=tolerance,
                             backbone_name=getattr(backbone_class(backbone), "name", backbone), steps_list=list(steps))
    zoo_specs = parse_zoo(zoo)
    bb = _backbone(backbone, model, device, dtype, offload_mode or offload, decode_chunk, progress, guidance)
    s = load_suite(suite, bb)
    # a distilled row samples at its own pipeline's guidance (Flux-Schnell takes none)
    # ... and shares the main pipeline's text encoders, tokenizers and VAE where their files are identical
    share = bb if hasattr(bb, "pipe") else None
    others = [_backbone(name, other_model or None, device, dtype, offload_mode or offload, decode_chunk, progress, share_with=share) for name, _, other_model in (d.partition("=") for d in distilled)]
    cmd = compare_command(suite, backbone, list(steps), model, seeds, list(schedule), list(distilled), zoo=zoo_specs,
                          check=check, tolerance=tolerance, strict=strict, guidance=guidance)
    result = run_compare(
        bb, s, list(steps), policies_dir=policies, records_path=records, leaderboard_dir=leaderboards, seeds=seeds,
        check=check, tolerance=tolerance, strict=strict, reports=list(report), extra_schedules=list(schedule), distilled=others, plots=plots, progress=progress, command=cmd,
        log=lambda msg: err.print(msg, style="dim", highlight=False, soft_wrap=True), batch_size=batch_size, zoo=zoo_specs,
    )
    from jsbench import tables

    if fmt != OutputFormat.table:  # the evaluated sections, exact
        sys.stdout.write(tables.sections_text(fmt.value, result.tables, suite))
    else:  # a narrow table per budget (80 columns)
        for table in tables.compare_tables(result.tables, suite, tasks):
            console.print(table)
        if result.tables and not tasks:
            console.print(tables.COMPARE_FOOTNOTE, style="dim", highlight=False)
    console_ = console if fmt == OutputFormat.table else err  # piped csv/json stays exactly parseable
    if check:
        report_ = result.check
        moved = tables.check_table(report_)
        if moved is not None:
            console_.print(moved)
        for path in result.written:
            console_.print(f"wrote {path}")
        console_.print(report_.headline, highlight=False, soft_wrap=True)
        raise typer.Exit(report_.exit_code)
    else:
        for path in result.written:
            console_.print(f"wrote {path}", highlight=False)


def _compare_all(ctx: typer.Context, command, recipe: Path, **resolved) -> None:
    """`compare --all`: each recipe run in turn, with the other options of this command line."""
    from jsbench.compare import read_recipe, recipe_run_command, recipe_run_options, validate_all_options

    try:
        from typer._click.core import ParameterSource
    except ImportError:  # typer on the click package
        from click.core import ParameterSource
    validate_all_options([n for n in ctx.params if ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE], ctx.params.get("report"))
    codes = []
    for run in read_recipe(recipe):
        err.print(f"[bold]{recipe_run_command(run)}[/]", highlight=False, soft_wrap=True)
        try:
            command(ctx, **{**ctx.params, **resolved, **recipe_run_options(run), "all_": False})
            codes.append(0)
        except typer.Exit as exc:
            codes.append(exc.exit_code)
    if any(codes):
        raise typer.Exit(max(codes))


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

    bb = _backbone(backbone, model, device)
    s = load_suite(suite, bb)
    sources = [resolve_schedule(spec, bb, steps, suite=s) for spec in schedule]
    prompts = list({it.task: it.prompt for it in s.items("test")}.values())[:6]
    for path in (
        plot_schedules(bb, sources, prompts, list(range(seeds)), out / "schedules.png"),
        plot_image_grid(bb, sources, prompts, 0, out / "images.png", suite_verdicts(s, s.items("test"))),
    ):
        console.print(f"wrote {path}")


@policies_app.command("list")
def policies_list(
    root: Optional[Path] = typer.Option(None, help="Folder to search (default: policies/ of the project root, " + _ROOT_HELP + ")."),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help=_FORMAT_HELP),
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

    from jsbench.policy_size import policy_size

    row = policy_size(backbone, steps, policy_arch)
    if fmt == SizeFormat.json:
        sys.stdout.write(json.dumps(row) + "\n")
        return
    console.print(f"{row['backbone']} at {row['steps']} steps, arch {row['arch']} (width {row['width']}, depth {row['depth']})")
    console.print(f"  parameters     {row['params'] / 1e6:.2f}M")
    console.print(f"  reads          {', '.join(row['reads'])}")
    console.print(f"  GFLOPs per row {row['gflops_per_row']:.2f}  ({100 * row['sampler_share']:.4f}% of one sampling)")


@policies_app.command("show")
def policies_show(path: Path = typer.Argument(..., help="Policy folder.")):
    """A policy's manifest, verified against its weights."""
    import json

    from jsbench.policy import load_policy

    _, manifest = load_policy(path)
    console.print_json(json.dumps(manifest))


def main() -> None:
    try:
        app(standalone_mode=True)
    except JsbenchError as exc:
        from rich.markup import escape

        # soft_wrap: the refusal stays ONE line in logs and narrow terminals (rich hard-wraps otherwise)
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()

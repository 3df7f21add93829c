"""The `jsbench` command line: thin, typed wrappers over the library.

Every refusal is one line on stderr and a non-zero exit; the library raises `JsbenchError` for them.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table as RichTable

from jsbench import JsbenchError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Learn instance-level sampling schedules for frozen text-to-image samplers, and benchmark them.\n\n"
    "Start with `jsbench compare`: it evaluates the default schedule, the shipped learned policies and the "
    "many-step ceiling on the embedded `analytic` world and writes leaderboards/geneval.md.",
)
policies_app = typer.Typer(no_args_is_help=True, help="List and inspect trained schedule policies.")
app.add_typer(policies_app, name="policies")
schedules_app = typer.Typer(no_args_is_help=True, help="Look at schedules: plot default vs learned schedules.")
app.add_typer(schedules_app, name="schedules")
console = Console()
err = Console(stderr=True)


class PolicyKind(str, Enum):
    instance = "instance"
    prompt = "prompt"
    global_ = "global"


def _backbone(name: str, model: Optional[str], device: Optional[str], dtype: Optional[str] = None, offload: bool = False,
              decode_chunk: Optional[int] = None):
    from jsbench.backbones import load_backbone

    return load_backbone(name, model, device, dtype=dtype, offload=offload, decode_chunk=decode_chunk)


# options of the real (diffusers) backbones, shared by train, eval and compare
_DTYPE_HELP = "Backbone dtype: bf16, fp16 or fp32 (default: bf16 on CUDA, fp32 on CPU). The policy and its schedules stay fp32."
_OFFLOAD_HELP = "Keep the backbone's networks on the CPU and move each to the GPU while it runs (diffusers' model CPU offload; for 24-48 GB GPUs)."
_DECODE_HELP = "Images per VAE decode call (default: the backbone's; a 1024^2 image peaks at ~1.4 GiB in bf16)."


@app.command()
def train(
    out: Path = typer.Option(..., help="Folder for the policy, its checkpoint and training log."),
    backbone: str = typer.Option("analytic", help="Backbone name (analytic, sdxl, sd35-medium, flux-dev, ...)."),
    model: Optional[str] = typer.Option(None, help="Hub id or local folder of the backbone's weights."),
    steps: int = typer.Option(5, help="Step budget N: the policy outputs N increments."),
    baseline: str = typer.Option("js", help="Reward baseline: none, rloo, xctx, js (James–Stein, Efron–Morris; needs --contexts >= 3) or js-plugin (the paper's plug-in, for comparison)."),
    reward: str = typer.Option("geneval", help="Reward to maximise (geneval, ocr, ...)."),
    suite: str = typer.Option("geneval", help="Suite whose training prompts are used."),
    policy: PolicyKind = typer.Option(PolicyKind.instance, help="instance: prompt + noise; prompt: prompt only; global: one schedule."),
    iters: int = typer.Option(200, help="Number of policy updates."),
    contexts: int = typer.Option(16, "--contexts", "-B", help="Contexts (prompt, seed) per update."),
    samples: int = typer.Option(4, "--samples", "-K", help="Schedules sampled per context."),
    lr: float = typer.Option(1e-2, help="AdamW learning rate of the shared schedule (global alpha / output bias)."),
    network_lr: float = typer.Option(1e-3, help="AdamW learning rate of the conditioning network (instance policies)."),
    concentration: float = typer.Option(32.0, help="Initial Dirichlet concentration c0 (alpha = c0 * default increments)."),
    seed: int = typer.Option(0, help="Seed of everything random in the run."),
    checkpoint_every: int = typer.Option(25, help="Updates between atomic checkpoints."),
    resume: bool = typer.Option(False, help="Continue from OUT/checkpoint.pt; ends exactly where the uninterrupted run would."),
    device: Optional[str] = typer.Option(None, help="torch device (default: cpu for analytic, cuda if available otherwise)."),
    dtype: Optional[str] = typer.Option(None, help=_DTYPE_HELP),
    offload: bool = typer.Option(False, "--offload", help=_OFFLOAD_HELP),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Rows per sampler call within an update (default: the backbone's train batch; B and K are unchanged)."),
    decode_chunk: Optional[int] = typer.Option(None, "--decode-chunk", min=1, help=_DECODE_HELP),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    processes: int = typer.Option(1, "--processes", min=1, help="Split each update's contexts over N local processes (runs torchrun; needs accelerate). For GPUs and nodes use `accelerate launch -m jsbench train ...`."),
):
    """Train a schedule policy with REINFORCE and a leave-one-out baseline; writes OUT/policy.safetensors + manifest.json."""
    if processes > 1:
        from jsbench.distributed import launch_processes

        raise typer.Exit(launch_processes(processes))
    from jsbench.train import TrainConfig, Trainer

    config = TrainConfig(
        backbone=backbone, model=model, steps=steps, baseline=baseline, reward=reward, suite=suite, policy=policy.value,
        iters=iters, contexts=contexts, samples=samples, lr=lr, network_lr=network_lr, concentration=concentration, seed=seed,
        checkpoint_every=checkpoint_every, device=device, dtype=dtype, offload=offload, batch_size=batch_size,
        decode_chunk=decode_chunk,
    )
    trainer = Trainer(config, out)
    if resume:
        trainer.resume()
    elif trainer.checkpoint_path.exists():
        raise JsbenchError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
    trainer.train(progress=progress)
    path = trainer.save_policy()
    if trainer.dist.is_main:
        console.print(f"policy written to [bold]{path}[/]")


@app.command("eval")
def eval_(
    suite: str = typer.Option("geneval", help="Suite: geneval, ocr, hpdv2."),
    backbone: str = typer.Option("analytic", help="Backbone name."),
    model: Optional[str] = typer.Option(None, help="Hub id or local folder of the backbone's weights."),
    steps: int = typer.Option(5, help="Step budget."),
    schedule: str = typer.Option("default", help="default | ceiling | uniform | shift:S | policy:PATH | karras[:RHO] | exponential | beta[:A,B] | ays | oss[:M] | searched | file:PATH (oss and searched are computed once on the training prompts and cached under schedules/)."),
    seeds: int = typer.Option(16, help="Images (seeds) per prompt."),
    split: str = typer.Option("test", help="Prompt split: test (held out), train or all."),
    metadata: Optional[Path] = typer.Option(None, help="GenEval evaluation_metadata.jsonl to evaluate instead of the suite's test prompts (--suite geneval; on analytic, prompts the world draws)."),
    prompts_file: Optional[Path] = typer.Option(None, "--prompts-file", help="UTF-8 text file, one prompt of the suite a line: evaluate these instead of --split."),
    out: Path = typer.Option(Path("results/records.jsonl"), help="Records file (JSONL, appended atomically)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Images sampled per batch (default: the backbone's eval batch, 512 for analytic); finished batches survive a kill."),
    device: Optional[str] = typer.Option(None),
    dtype: Optional[str] = typer.Option(None, help=_DTYPE_HELP),
    offload: bool = typer.Option(False, "--offload", help=_OFFLOAD_HELP),
    decode_chunk: Optional[int] = typer.Option(None, "--decode-chunk", min=1, help=_DECODE_HELP),
    progress: bool = typer.Option(True),
    processes: int = typer.Option(1, "--processes", min=1, help="Shard the prompts over N local processes (runs torchrun; needs accelerate); records are gathered and written once."),
):
    """Evaluate one schedule on a suite and append its records."""
    if processes > 1:
        from jsbench.distributed import launch_processes

        raise typer.Exit(launch_processes(processes))
    from jsbench.distributed import evaluate_sharded, get_context
    from jsbench.evaluate import discard_partial, items_for_prompts, read_prompts_file, resolve_schedule
    from jsbench.results import append_records, make_records
    from jsbench.suites import load_suite

    if split not in ("test", "train", "all"):
        raise JsbenchError(f"unknown split {split!r}: use test, train or all")
    if metadata is not None and suite != "geneval":
        raise JsbenchError(f"--metadata is GenEval's evaluation_metadata.jsonl; it applies to --suite geneval, not {suite!r}")
    prompt_list = read_prompts_file(prompts_file) if prompts_file is not None else None  # refuse before loading weights
    ctx = get_context()
    if device is None and ctx.distributed and ctx.device.type != "cpu":
        device = str(ctx.device)  # one accelerator per process
    bb = _backbone(backbone, model, device, dtype, offload, decode_chunk)
    s = load_suite(suite, bb, **({"metadata": str(metadata)} if metadata is not None else {}))
    items = items_for_prompts(s, prompt_list, prompts_file) if prompt_list is not None else None
    source = resolve_schedule(schedule, bb, steps, suite=s, log=lambda m: err.print(m, highlight=False, soft_wrap=True))
    run = evaluate_sharded(bb, s, source, ctx, seeds_per_prompt=seeds, split=split, progress=progress, out=out, items=items, batch_size=batch_size)
    if not ctx.is_main:
        return  # rank 0 writes the records once
    records = make_records(bb, s, source, run)
    append_records(out, records)
    discard_partial(out)
    table = RichTable(title=f"{suite} · {bb.name} · {source.label} · {source.steps} steps")
    for col in ("task", "metric", "value", "stderr", "images"):
        table.add_column(col)
    for r in records:
        table.add_row(r.task, r.metric, f"{r.value:.3f}", f"{r.stderr:.3f}", str(r.n_images))
    console.print(table)


@app.command()
def compare(
    suite: str = typer.Option("geneval", help="Suite to compare on."),
    backbone: str = typer.Option("analytic", help="Backbone name."),
    model: Optional[str] = typer.Option(None, help="Hub id or local folder of the backbone's weights."),
    steps: List[int] = typer.Option([3, 5], help="Step budgets (repeat the option for several)."),
    seeds: int = typer.Option(16, help="Images (seeds) per prompt."),
    policies: Path = typer.Option(Path("policies"), help="Folder of shipped policies (policies/<backbone>/<name>/)."),
    records: Path = typer.Option(Path("results/records.jsonl"), help="Records file to append to."),
    leaderboards: Path = typer.Option(Path("leaderboards"), help="Where <suite>.md and <suite>.csv are written."),
    schedule: List[str] = typer.Option([], help="Extra schedule rows, e.g. --schedule shift:3 --schedule uniform."),
    zoo: str = typer.Option("karras,ays,oss,searched", help="Schedule-zoo rows beside default, comma-separated: karras[:RHO], exponential, beta[:A,B], ays, oss[:M], searched (or none). ays appears where the model family has one (SD-XL), oss where the backbone exposes its velocity; oss and searched are computed once on the suite's training prompts and cached under schedules/."),
    distilled: List[str] = typer.Option([], help="Distilled sampler rows at their own default budget: NAME or NAME=MODEL, e.g. --distilled flux-schnell."),
    check: bool = typer.Option(False, help="Do not write the leaderboard; check every committed row and task against this run (exit 1 if one regressed)."),
    report: List[Path] = typer.Option([], help="With --check: write the report to PATH, format from the suffix: .md (CI job summary), .json, .xml (JUnit); repeat for several."),
    strict: bool = typer.Option(False, help="With --check: a committed row this run does not produce (missing) fails the check too."),
    plots: bool = typer.Option(True, help="Write schedule, image-grid and training-curve figures beside the tables (with --check --report: into figures/ beside the first report)."),
    tolerance: float = typer.Option(2.0, help="With --check: allowed drop, in standard errors of the paired difference (same prompts and seeds)."),
    device: Optional[str] = typer.Option(None),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Images sampled per batch (default: each backbone's eval batch, 512 for analytic)."),
    dtype: Optional[str] = typer.Option(None, help=_DTYPE_HELP),
    offload: bool = typer.Option(False, "--offload", help=_OFFLOAD_HELP),
    decode_chunk: Optional[int] = typer.Option(None, "--decode-chunk", min=1, help=_DECODE_HELP),
    progress: bool = typer.Option(True),
):
    """Evaluate default, shipped policies and the ceiling; write leaderboards/<suite>.md|csv (or --check them).

    With --check, exit codes: 0 nothing regressed, 1 a row or task regressed (or, with --strict, a committed
    row is missing), 2 refused (bad input, e.g. no committed leaderboard or an unknown --report suffix)."""
    from jsbench.compare import run_compare
    from jsbench.report import report_format
    from jsbench.suites import load_suite

    if (report or strict) and not check:
        raise JsbenchError("--report and --strict go with --check: the report is that of the regression check")
    for path in report:
        report_format(path)  # an unknown suffix is refused before any weights load
    bb = _backbone(backbone, model, device, dtype, offload, decode_chunk)
    s = load_suite(suite, bb)
    others = [_backbone(name, other_model or None, device, dtype, offload, decode_chunk) for name, _, other_model in (d.partition("=") for d in distilled)]
    cmd = "jsbench compare --suite {} --backbone {} {}".format(suite, backbone, " ".join(f"--steps {n}" for n in steps))
    from jsbench.zoo import DEFAULT_ZOO, parse_zoo

    zoo_specs = parse_zoo(zoo)
    if zoo_specs != list(DEFAULT_ZOO):
        cmd += f" --zoo {','.join(zoo_specs) or 'none'}"
    if check:
        cmd += f" --seeds {seeds} --check" + (f" --tolerance {tolerance:g}" if tolerance != 2.0 else "") + (" --strict" if strict else "")
    result = run_compare(
        bb, s, list(steps), policies_dir=policies, records_path=records, leaderboard_dir=leaderboards, seeds=seeds,
        check=check, tolerance=tolerance, strict=strict, reports=list(report), extra_schedules=list(schedule), distilled=others, plots=plots, progress=progress, command=cmd,
        log=lambda msg: console.print(msg, style="dim"), batch_size=batch_size, zoo=zoo_specs,
    )
    for t in result.tables:
        table = RichTable(title=f"{suite} · {t.backbone} · {t.steps} steps")
        for col in ["method", "steps", *t.tasks, "overall", "Δ vs default"]:
            table.add_column(col)
        for row in t.rows:
            delta = "–" if row["delta"] is None else f"{row['delta']:+.3f} ± {row['delta_stderr']:.3f}"
            table.add_row(row["method"], str(row["steps"]), *[f"{row[k]:.3f}" for k in t.tasks], f"{row['overall']:.3f} ± {row['stderr']:.3f}", delta)
        console.print(table)
    if check:
        report_ = result.check
        shown = [r for r in report_.rows if r.verdict != "unchanged" or r.changed]
        if shown:
            table = RichTable(title=f"committed rows that moved or are missing (tolerance {report_.tolerance:g} × SE of the paired Δ)")
            for col in ("verdict", "steps", "method", "task", "committed", "fresh", "Δ ± SE(Δ)", "allowed drop", "images ↑/↓"):
                table.add_column(col)
            for r in shown:
                se = "" if r.delta_stderr is None else f" ± {r.delta_stderr:.4f}" + ("" if r.paired else " (unpaired)")
                images = f"↑{r.images_up} ↓{r.images_down} of {r.n_images}" if r.paired else "–"
                style = {"regressed": "red", "missing": "yellow", "improved": "green"}.get(r.verdict)
                table.add_row(r.verdict, str(r.steps), r.method, r.task, "–" if r.committed is None else f"{r.committed:.3f}",
                              "–" if r.fresh is None else f"{r.fresh:.3f}", ("–" if r.delta is None else f"{r.delta:+.4f}") + se,
                              "–" if r.allowed_drop is None else f"{r.allowed_drop:.4f}", images, style=style)
            console.print(table)
        for path in result.written:
            console.print(f"wrote {path}")
        console.print(report_.headline, highlight=False, soft_wrap=True)
        raise typer.Exit(report_.exit_code)
    else:
        for path in result.written:
            console.print(f"wrote {path}")


@app.command()
def prompts(
    suite: str = typer.Option("geneval", help="Suite."),
    backbone: str = typer.Option("analytic"),
    split: str = typer.Option("test", help="test, train or all."),
    fmt: str = typer.Option("tsv", "--format", help="tsv: task<TAB>prompt; jsonl: one json.dumps(metadata) a line (for --suite geneval on a real backbone, GenEval's evaluation_metadata.jsonl byte for byte)."),
):
    """Print a suite's prompts. Loads no model weights: the backbone is only asked whether it draws the embedded world."""
    import json

    from jsbench.suites import load_suite

    if fmt not in ("tsv", "jsonl"):
        raise JsbenchError(f"unknown --format {fmt!r}: use tsv or jsonl")
    s = load_suite(suite, _listing_backbone(backbone))
    items = s.items(split)
    if fmt == "jsonl":
        sys.stdout.write("".join(json.dumps(it.metadata if it.metadata else {"tag": it.task, "prompt": it.prompt}) + "\n" for it in items))
        return
    for it in items:
        typer.echo(f"{it.task}\t{it.prompt}")


def _listing_backbone(name: str):
    """What a suite needs to list a real backbone's prompts: its name, read from its class without building
    it (no weights). A backbone that draws an embedded world (its prompts may be its own) or whose class
    is unknown is loaded: the embedded worlds are small."""
    from types import SimpleNamespace

    from jsbench.backbones import backbone_class

    cls = backbone_class(name)
    if cls is None or getattr(cls, "draws_embedded_world", False):
        return _backbone(name, None, None)
    return SimpleNamespace(name=name, model_id=getattr(cls, "default_model_id", name), device=None,
                           draws_embedded_world=bool(getattr(cls, "draws_embedded_world", False)))


@schedules_app.command("plot")
def schedules_plot(
    schedule: List[str] = typer.Option(["default"], help="Schedule sources to plot (default, policy:PATH, shift:S, ...); repeat."),
    suite: str = typer.Option("geneval", help="Suite whose held-out prompts are plotted (one per task)."),
    backbone: str = typer.Option("analytic"),
    model: Optional[str] = typer.Option(None),
    steps: int = typer.Option(5),
    seeds: int = typer.Option(4, help="Seeds per prompt for the spread panel."),
    out: Path = typer.Option(Path("figures"), help="Output folder for schedules.png and images.png."),
    device: Optional[str] = typer.Option(None),
):
    """Plot schedules (per prompt, and their spread over prompts x seeds) and an image grid per source."""
    from jsbench.evaluate import resolve_schedule
    from jsbench.plots import plot_image_grid, plot_schedules
    from jsbench.suites import load_suite

    bb = _backbone(backbone, model, device)
    s = load_suite(suite, bb)
    sources = [resolve_schedule(spec, bb, steps, suite=s) for spec in schedule]
    prompts = list({it.task: it.prompt for it in s.items("test")}.values())[:6]
    for path in (
        plot_schedules(bb, sources, prompts, list(range(seeds)), out / "schedules.png"),
        plot_image_grid(bb, sources, prompts, 0, out / "images.png"),
    ):
        console.print(f"wrote {path}")


@policies_app.command("list")
def policies_list(root: Path = typer.Option(Path("policies"), help="Folder to search.")):
    """Every policy under ROOT with its backbone, steps, kind and baseline."""
    from jsbench.policy import read_manifest

    table = RichTable()
    for col in ("path", "backbone", "steps", "kind", "baseline", "reward", "checksum"):
        table.add_column(col)
    for manifest in sorted(root.rglob("manifest.json")):
        m = read_manifest(manifest.parent)
        table.add_row(str(manifest.parent), m.get("backbone", "?"), str(m.get("steps")), m.get("kind", "?"), m.get("baseline", "–"), m.get("reward", "–"), (m.get("checksum") or "")[:12])
    console.print(table)


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

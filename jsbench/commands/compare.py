"""`jsbench compare` from start to finish, for a request that cli.py builds from the command line: the refusals
that need no model (every one before any process starts or weights load), --plan, --processes, one compare
(`jsbench.report.compare.run_compare`) or --all's loop over the runs of leaderboards/recipe.json, the tables it
shows, and its exit code."""

from __future__ import annotations

import sys
from dataclasses import replace

from jsbench import JsbenchError
from jsbench.report.compare import resolve_folders, run_compare, validate_compare_options
from jsbench.report.compare_request import RECIPE_KEYS, RECIPE_NAME, CompareRequest, compare_command, read_recipe, recipe_fields


def run_command(request: CompareRequest, *, given: list[str] = (), command_line: str = "jsbench compare", out=None, err=None) -> int:
    """What `jsbench compare` does with a request: its plan (--plan), or its rows evaluated and the leaderboard
    written or checked, or (--all) that for every run of LEADERBOARDS/recipe.json in turn. Every refusal
    (`JsbenchError`, one line, exit 2) comes before any process starts or weights load. `given`: the options
    named on the command line (--all refuses the per-run ones); `command_line`: what a plan names; `out`,
    `err`: the rich consoles of stdout and stderr. Returns the exit code: 0, or 1 when a check found a row
    that regressed (under --strict, or one missing), or the launched processes' own (--processes)."""
    from rich.console import Console

    out, err = out or Console(), err or Console(stderr=True)
    if request.all_runs:
        return _run_recipe(request, given, command_line, out, err)
    request = resolve_folders(request)
    if request.plan:
        return _plan(request, command_line)
    refuse_before_work(request)
    if request.processes > 1:
        from jsbench.distributed import launch_processes

        return launch_processes(request.processes)
    from jsbench.distributed import get_context

    return _run_one(request, get_context(), out, err)


def _run_recipe(request: CompareRequest, given: list[str], command_line: str, out, err) -> int:
    """`compare --all`: each recipe run, its per-run options over the other options of this request; every
    run's refusals before the first one starts; under --processes, one launch and one group for them all."""
    from jsbench.workspace import project_dir

    named = [n for n in RECIPE_KEYS if n in given]
    if named:
        flag = "--" + named[0].replace("_", "-")
        raise JsbenchError(f"--all takes {flag} and the other per-run options from the recipe; drop {flag} or run without --all")
    if request.report:
        raise JsbenchError("--report writes the check of one run; with --all, check each recipe run with its own command and --report")
    entries = read_recipe((request.leaderboards or project_dir("leaderboards")) / RECIPE_NAME)
    runs = [resolve_folders(replace(request, all_runs=False, **recipe_fields(entry))) for entry in entries]
    if request.plan:
        for entry, run in zip(entries, runs):
            err.print(f"[bold]{compare_command(entry)}[/]", highlight=False, soft_wrap=True)
            _plan(run, command_line)
        return 0
    for run in runs:
        refuse_before_work(run)
    if request.processes > 1:  # launched once for the whole recipe: its processes run every run
        from jsbench.distributed import launch_processes

        return launch_processes(request.processes)
    from jsbench.distributed import get_context

    dist = get_context()
    codes = []
    with dist.held():  # under --processes: one group for every run of the recipe
        for entry, run in zip(entries, runs):
            if dist.is_main:
                err.print(f"[bold]{compare_command(entry)}[/]", highlight=False, soft_wrap=True)
            codes.append(_run_one(run, dist, out, err))
    return max(codes)


def _plan(request: CompareRequest, command_line: str) -> int:
    """--plan: the rows the request would evaluate and their cost, loading nothing."""
    from jsbench.report.plan import plan_compare, plan_text
    from jsbench.zoo import parse_zoo

    zoo = parse_zoo(request.zoo) if request.zoo is not None else None  # None: the backbone's default rows
    p = plan_compare(request.suite, request.backbone, list(request.steps), gpu=request.gpu, seeds=request.seeds, zoo=zoo,
                     schedules=list(request.schedule), distilled=list(request.distilled), limit=request.limit,
                     policies_dir=request.policies, command=command_line)
    sys.stdout.write(plan_text(p, "json" if request.format == "json" else "table"))
    return 0


def refuse_before_work(request: CompareRequest) -> list[dict]:
    """Every refusal of a request (its folders resolved) that needs no weights, each one line: a zoo, --limit or
    --ocr-protocol that names nothing, --limit with --check, the options of the check
    (`validate_compare_options`), an output that cannot be written, a --device this torch cannot use, and
    what the suite cannot score on this backbone. Returns the committed rows the check reads."""
    from jsbench.backbones import backbone_class
    from jsbench.devices import pick_device
    from jsbench.io import check_writable_file, check_writable_folder
    from jsbench.evaluation.protocol import check_limit
    from jsbench.suites import preflight, suite_options
    from jsbench.zoo import parse_zoo

    if request.zoo is not None:
        parse_zoo(request.zoo)
    check_limit(request.limit)
    suite_options(request.suite, request.ocr_protocol)
    if request.limit is not None and request.check:
        raise JsbenchError("--limit evaluates part of the prompts; --check compares with the committed rows on all of them: drop one")
    cls = backbone_class(request.backbone)
    # the check's scope by the backbone's name (its class's) and the budgets
    committed = validate_compare_options(request, backbone_name=request.backbone if cls is None else cls.name)  # None: unknown, refused on loading
    check_writable_file(request.records, "--records")
    if request.check:
        for path in request.report:
            check_writable_file(path, "--report")
    else:
        check_writable_folder(request.leaderboards, "--leaderboards")
    if request.device is not None:
        pick_device(request.device)
    preflight(request.suite, cls)  # what the suite cannot score (ocr without text, hpdv2 without HPSv2)
    return committed


def _load(name: str, model: str | None, device, request: CompareRequest, progress: bool, **options):
    from jsbench.backbones import load_backbone
    from jsbench.progress import quiet_model_loading

    quiet_model_loading(show_bars=progress)  # --no-progress also hides the libraries' loading bars
    return load_backbone(name, model, device, dtype=request.dtype, offload=request.offload_mode or request.offload,
                         decode_chunk=request.decode_chunk, **options)


def _run_one(request: CompareRequest, dist, out, err) -> int:
    """One compare in this process (one of `dist`'s): load, evaluate, write or check, show the tables."""
    from jsbench.commands import tables
    from jsbench.devices import pick_device
    from jsbench.suites import load_suite, suite_options

    device = pick_device(request.device, dist=dist)  # one accelerator per process
    bars = request.progress and dist.is_main
    bb = _load(request.backbone, request.model, device, request, bars, guidance=request.guidance)
    s = load_suite(request.suite, bb, **suite_options(request.suite, request.ocr_protocol))
    # a distilled row samples at its own pipeline's guidance (Flux-Schnell takes none) and shares the main
    # pipeline's text encoders, tokenizers and VAE where their files are identical
    share = bb if hasattr(bb, "pipe") else None
    others = [_load(name, other_model or None, device, request, bars, share_with=share)
              for name, _, other_model in (d.partition("=") for d in request.distilled)]
    result = run_compare(request, bb, s, distilled=others, log=lambda msg: err.print(msg, style="dim", highlight=False, soft_wrap=True),
                         ctx=dist if dist.distributed else None)
    if not dist.is_main:
        dist.close()
        return 0
    if request.format != "table":  # the evaluated sections, exact
        sys.stdout.write(tables.sections_text(request.format, result.tables, request.suite))
    else:  # a narrow table per budget (80 columns)
        for table in tables.compare_tables(result.tables, request.suite, request.tasks):
            out.print(table)
        if result.tables and not request.tasks:
            out.print(tables.COMPARE_FOOTNOTE, style="dim", highlight=False)
    shown = out if request.format == "table" else err  # piped csv/json stays exactly parseable
    code = 0
    if request.check:
        moved = tables.check_table(result.check)
        if moved is not None:
            shown.print(moved)
        for path in result.written:
            shown.print(f"wrote {path}")
        shown.print(result.check.headline, highlight=False, soft_wrap=True)
        code = result.check.exit_code
    else:
        for path in result.written:
            shown.print(f"wrote {path}", highlight=False)
    dist.close()
    return code

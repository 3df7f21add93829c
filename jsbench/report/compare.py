"""`compare`: evaluate the default schedule, the shipped policies and the ceiling side by side, append
records, render the leaderboard, and optionally check it against the committed one.

`run_compare(request, ...)` evaluates one `CompareRequest` (jsbench/report/compare_request.py) on a loaded backbone
and suite; jsbench/commands/compare.py runs a whole `jsbench compare` around it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from jsbench import JsbenchError
from jsbench.report.contrasts import contrasts_path, section_contrasts, write_contrasts
from jsbench.evaluation.evaluate import discard_partial, resolve_schedule
from jsbench.io import training_runs, write_text_atomic
from jsbench.report.leaderboard import Table, add_reference_deltas, build_tables, merge_tables, read_committed, render_csv, render_markdown, tables_from_csv
from jsbench.policy.schedule_policy import read_manifest
from jsbench.evaluation.results import append_records, make_records
from jsbench.report.regression_check import CheckReport, check_against_committed, check_scope, check_tolerance, read_scores, row_key, scores_path, write_scores
from jsbench.report.regression_reports import report_format, write_report
from jsbench.evaluation.runs import evaluate_run, run_eval
from jsbench.report.compare_request import DEFAULT_REREAD, CompareRequest, compare_command, recorded_request

REGENERATE_ALL = "jsbench compare --all"  # runs every invocation of leaderboards/recipe.json


@dataclass
class CompareResult:
    tables: list[Table]
    check: CheckReport | None = None  # with check=True: every committed row and task against this run
    written: list[Path] = field(default_factory=list)


def shipped_policies(policies_dir: Path, backbone: str, steps: int, suite: str | None = None) -> list[list[Path]]:
    """The learned rows under policies_dir/<backbone>/ whose manifests match the backbone and budget (and, given
    `suite`, were trained on that suite's prompts: an OCR policy is no GenEval row, nor the other way), each
    the list of its training seeds' policy folders: `<row>/seed<S>/` in the order of S, or the row folder
    itself when it holds a manifest.json (a row trained once)."""
    root = Path(policies_dir) / backbone
    rows = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        seeds = training_runs(folder)
        manifests = [read_manifest(p) for p in seeds]
        if seeds and all(m.get("backbone") == backbone and m.get("steps") == steps and (suite is None or m.get("suite", suite) == suite)
                        for m in manifests):
            rows.append(seeds)
    return rows


def evaluate_learned_row(backbone, suite, seed_folders: list[Path], steps: int, *, seeds: int, seed_base: int, batch_size=None, on_images=None,
                         log=None, items: list | None = None, ctx=None, save_images: Path | None = None):
    """A learned row: each training seed's policy evaluated on the same prompts and images, and the row
    source (spec `policy:<row folder>`, every seed's manifest) with the run holding the per-image mean over
    seeds and each seed's scores (`EvalRun.seed_scores`)."""
    import hashlib

    from jsbench.evaluation.evaluate import mean_over_seeds

    sources = [resolve_schedule(f"policy:{p}", backbone, steps, suite=suite, log=log) for p in seed_folders]
    labels = {s.label for s in sources}
    if len(labels) > 1:
        raise JsbenchError(f"the training seeds of {seed_folders[0].parent} are different methods ({', '.join(sorted(labels))})")
    runs = []
    for folder, s in zip(seed_folders, sources):
        # each training seed's images in a folder of its own
        images = None if save_images is None else Path(f"{save_images}-{folder.name}") if len(sources) > 1 else Path(save_images)
        runs.append(evaluate_run(backbone, suite, s, ctx=ctx, save_images=images, seeds_per_prompt=seeds, seed_base=seed_base,
                                 batch_size=batch_size, progress=False, on_images=on_images, items=items))
    if ctx is not None and not ctx.is_main:
        return sources[0], None  # the main process files the row
    if len(seed_folders) == 1 and not seed_folders[0].name.startswith("seed"):
        return sources[0], runs[0]  # a row trained once, in a flat folder
    row = seed_folders[0].parent
    checksum = hashlib.sha256("".join(s.checksum or "" for s in sources).encode()).hexdigest()
    source = replace(sources[0], spec=f"policy:{row}", checksum=checksum, seed_manifests=[s.manifest or {} for s in sources])
    return source, mean_over_seeds(runs)


def validate_compare_options(request: CompareRequest, *, backbone_name: str | None = None) -> list[dict]:
    """The refusals of a request's options that need no model: `jsbench compare` runs them before any process
    starts or weights load, and `run_compare` again for callers of the library. A --reread outside [0, 1],
    or given without --check. With --check: a negative tolerance; given the leaderboard folder
    (`request.leaderboards`), no committed leaderboard of the suite to check against; given the backbone's
    name too (its class's), a check that would compare nothing (no
    committed row of that backbone at the request's budgets; the model, known once loaded, is checked after
    the evaluation). Returns the committed rows it read (empty when it read none), so the check that follows
    need not read them again."""
    reports, leaderboard_dir = list(request.report), request.leaderboards
    if (reports or request.strict) and not request.check:
        raise JsbenchError("--report and --strict go with --check: the report is that of the regression check")
    for path in reports:
        report_format(path)  # an unknown suffix
    if request.reread is not None and not 0.0 <= request.reread <= 1.0:
        raise JsbenchError(f"--reread is a share between 0 and 1 (1 reads every image again), got {request.reread}")
    if request.reread is not None and not request.check:  # given at all: a writing run reads every image
        raise JsbenchError("--reread goes with --check: it is the share of the committed OCR readings the check reads again")
    if not request.check:
        if leaderboard_dir is not None:
            read_committed(Path(leaderboard_dir) / f"{request.suite}.csv")  # a damaged page is refused now, not after the run
        return []
    check_tolerance(request.tolerance)
    if leaderboard_dir is None:
        return []
    csv_path = Path(leaderboard_dir) / f"{request.suite}.csv"
    committed = read_committed(csv_path)
    if not committed:
        raise JsbenchError(f"--check needs a committed leaderboard at {csv_path}")
    if backbone_name is not None:
        check_scope(committed, backbone_name, list(request.steps), where=str(csv_path))
    return committed


def resolve_folders(request: CompareRequest) -> CompareRequest:
    """`request` with its default folders found: the project's policies/, and its leaderboards/ (a check reads
    the committed tables, the installed checkout's outside a project; a run writes them, and outside a
    project it writes ./leaderboards, never into the installed checkout)."""
    from jsbench.workspace import project_dir

    return replace(request, policies=request.policies or project_dir("policies"),
                   leaderboards=request.leaderboards or project_dir("leaderboards", installed=request.check))


def run_compare(request: CompareRequest, backbone, suite, *, distilled: list = (), items: list | None = None, log=print,
                ctx=None) -> CompareResult:
    """Every row (default, zoo, extra schedules, shipped policies, the ceiling, distilled samplers) of
    `request` on the suite's test prompts (`--limit`'s first prompts of each task; or `items`), records, then
    the leaderboard or its check. `backbone`, `suite` and `distilled` are the request's, loaded (the suite's
    name files the rows). Each row keeps its per-image side file until the leaderboard is written, so a
    compare that was interrupted resumes without resampling an image. `--save-images`: PNGs per row under
    `save_images/<backbone>-n<steps>-<row>/`. `ctx`: a DistContext sharding every row's prompts over its
    processes (the main process alone writes). A named zoo runs its opt-in rows (`zoo.zoo_rows`)."""
    from jsbench.evaluation.protocol import ceiling_spec, default_seeds, default_zoo, first_per_task, is_real
    from jsbench.zoo import parse_zoo

    request = resolve_folders(replace(request, suite=suite.name))
    policies_dir, records_path, leaderboard_dir = request.policies, request.records, request.leaderboards
    steps_list, check, reports, plots, progress = list(request.steps), request.check, list(request.report), request.plots, request.progress
    real = is_real(backbone)
    seeds = default_seeds(suite.name, real) if request.seeds is None else request.seeds
    zoo = parse_zoo(request.zoo) if request.zoo is not None else default_zoo(real)
    if items is None and request.limit is not None:
        items = first_per_task(suite.items("test"), request.limit)
    batch_size, seed_base, save_images = request.batch_size, request.seed_base, request.save_images
    command = compare_command(recorded_request(request, real))
    main = ctx is None or ctx.is_main
    log = log if main else (lambda msg: None)
    committed = validate_compare_options(request, backbone_name=backbone.name)  # before anything is evaluated
    committed_scores = read_scores(scores_path(leaderboard_dir, suite.name)) if check else {}
    from jsbench.report.readings import SectionReadings

    # an OCR suite's readings: kept by a writing run, answered from by a check
    readings = SectionReadings(suite, leaderboard_dir, ctx, log, reread=(DEFAULT_REREAD if request.reread is None else request.reread) if check else None)
    try:
        runs: dict[tuple, object] = {}  # row key -> this run's per-image scores (EvalRun)
        ceiling_done = False
        plotted: dict[int, list] = {}
        made = []  # this run's records: the sections it writes hold these rows and no older ones
        plan = []  # (steps, specs): every row first, so one bar covers them all
        for steps in steps_list:
            found = shipped_policies(policies_dir, backbone.name, steps, suite.name)
            if not found:
                log(f"no learned policies for {backbone.name} at {steps} steps under {policies_dir}/{backbone.name}/: "
                    "only default, extra and ceiling rows (pass --policies FOLDER to use others)")
            # the zoo's rows (karras, ays, oss, searched, ...) that exist for this backbone, beside default
            from jsbench.zoo import zoo_rows

            specs = ["default", *zoo_rows(zoo, backbone, steps, log, explicit=request.zoo is not None), *request.schedule] + [seed_folders for seed_folders in found]
            if not ceiling_done:
                specs.append(ceiling_spec(backbone))
                ceiling_done = True
            plan.append((steps, specs))
        from jsbench.progress import image_bar

        rows_total = sum(sum(len(sp) if isinstance(sp, list) else 1 for sp in specs) + len(distilled) for _, specs in plan)
        n_items = len(items) if items is not None else len(suite.items("test"))
        from jsbench.zoo.kept_searches import shared_searches

        # shared_searches: oss-image's per-image DP at one step count has the levels of every smaller one
        with image_bar(f"[bold]compare {backbone.name} · {suite.name}", rows_total * n_items * seeds, progress and main) as bar, shared_searches():
            for steps, specs in plan:
                reference = None
                readings.start()
                for spec in specs:
                    if isinstance(spec, list):  # a learned row: the folders of its training seeds
                        row_name = spec[0].parent.name if spec[0].name.startswith("seed") else spec[0].name
                        bar.status(f"{row_name} · {len(spec)} training seed(s)")
                        source, run = evaluate_learned_row(backbone, suite, spec, steps, seeds=seeds, seed_base=seed_base, batch_size=batch_size,
                                                           on_images=bar.advance, log=log, items=items, ctx=ctx,
                                                           save_images=_images_dir(save_images, backbone.name, steps, f"policy-{row_name}"))
                        if not main:
                            continue
                        plotted.setdefault(steps, []).append(replace(source, spec=f"policy:{spec[0]}"))  # figures: its first seed
                        records = make_records(backbone, suite, source, run, reference=reference)
                        append_records(records_path, records)
                    else:
                        source = resolve_schedule(spec, backbone, steps, suite=suite, log=log)
                        plotted.setdefault(steps, []).append(source)
                        bar.status(f"{source.label} · {source.steps} steps")
                        paired = reference if source.steps == steps and spec != "default" else None
                        run, records = run_eval(backbone, suite, source, records_path, seeds_per_prompt=seeds, progress=False, batch_size=batch_size,
                                                on_images=bar.advance, reference=paired, seed_base=seed_base, items=items, ctx=ctx, keep_partial=True,
                                                save_images=_images_dir(save_images, backbone.name, steps, spec))
                    runs[row_key(backbone.name, backbone.model_id, source.row_steps, source.label)] = run
                    if spec == "default":
                        reference = run
                    made += records
                    log(f"  {source.label:<22} {steps if source.steps == steps else source.steps:>4} steps  done")
                for other in distilled:
                    # a distilled sampler runs at its own default steps, on the same prompts and seeds, and is
                    # filed as a row of this backbone's table at this budget, so it sits beside the learned rows
                    own = steps if other.default_steps is None else int(other.default_steps)
                    source = replace(resolve_schedule("default", other, own), label=f"{other.name} ({own} steps, distilled)", budget=steps)
                    bar.status(source.label)
                    run, records = run_eval(other, suite, source, records_path, seeds_per_prompt=seeds, progress=False, batch_size=batch_size,
                                            on_images=bar.advance, reference=reference, filed_under=backbone, seed_base=seed_base, items=items, ctx=ctx,
                                            keep_partial=True, save_images=_images_dir(save_images, other.name, steps, "default"))
                    runs[row_key(backbone.name, backbone.model_id, source.row_steps, source.label)] = run  # the row shows its section's budget
                    made += records
                    log(f"  {source.label:<22} {own:>4} steps  done")
                readings.finish(backbone.name, backbone.model_id, steps)
        answered = readings.summary() if check else None  # every process: it sums their counts
        if not main:
            return CompareResult(tables=[])  # the main process files the rows and writes the leaderboard
        plotted = with_ceiling(plotted)
        metric = suite.primary_metric
        tables = [t for t in build_tables(made, suite.name, metric) if t.steps in steps_list]
        for t in tables:
            t.command = command
        # every row's paired difference to the learned global row of its section, beside the one to default
        run_of = lambda t, row: runs.get(row_key(t.backbone, t.model_id, row["steps"], row["method"]))  # noqa: E731
        add_reference_deltas(tables, run_of, suite)
        result = CompareResult(tables=tables)
        provenance = made[0].provenance() if made else {}  # one suite, one detector and prompt set: every row's
        if check:
            result.check = check_against_committed(
                committed, committed_scores, runs, suite, backbone.name, backbone.model_id, steps_list, tolerance=request.tolerance,
                strict=request.strict, command=command, scores_file=scores_path(leaderboard_dir, suite.name).name, provenance=provenance,
            )
            if answered:
                log(answered)
            result.written = [write_report(result.check, path) for path in reports]
            if reports and plots:
                # this run's schedules and images beside the report (a CI artifact), never over the committed ones
                result.written += [p for _, p in write_figures(backbone, suite, plotted, policies_dir, Path(reports[0]).parent)]
            discard_partial(records_path)
            return result
        # merge by (backbone, model, steps) section into the leaderboard already there: this run replaces the
        # sections it evaluated and keeps every other one (another backbone's, another budget's) as it was
        csv_path = leaderboard_dir / f"{suite.name}.csv"
        all_tables = merge_tables(tables_from_csv(read_committed(csv_path)), tables, suite.unrecorded_provenance)
        fresh = write_figures(backbone, suite, plotted, policies_dir, leaderboard_dir) if plots else []
        # the page links every backbone's figures on disk, not only this run's (its tables cover them all)
        figures = figure_links(leaderboard_dir, suite.name)
        extra = "\n".join(f"### {title}\n\n![{title}]({path.relative_to(leaderboard_dir)})\n" for title, path in figures)
        extra = ("## Figures\n\n" + extra) if extra else ""
        further = []  # a suite's further metrics (ocr: MARIO-Eval's), beside the primary one's tables
        if suite.leaderboard_metrics:
            from jsbench.report.metric_tables import write_metric_tables

            metrics_csv, section = write_metric_tables(leaderboard_dir, suite, made, steps_list)
            further, extra = [metrics_csv], section + ("\n" + extra if extra else "")
        md = leaderboard_dir / f"{suite.name}.md"
        write_text_atomic(csv_path, render_csv(all_tables))
        # the page is rendered from the CSV as written (6 decimals), so a section reads the same whether this run
        # made it or an earlier one did (a fresh 0.98749999 and its CSV's 0.987500 round apart at 3 decimals)
        page = tables_from_csv(read_committed(csv_path))
        # the headline contrasts of the sections this run evaluated; the other sections keep theirs
        contrasts_csv = contrasts_path(leaderboard_dir, suite.name)
        contrasts = write_contrasts(contrasts_csv, [c for t in tables for c in section_contrasts(t, run_of, suite)],
                                    [(t.backbone, t.model_id, t.steps) for t in tables], [(t.backbone, t.model_id, t.steps) for t in page])
        write_text_atomic(md, render_markdown(page, suite.name, metric, REGENERATE_ALL, extra=extra, contrasts=contrasts,
                                              overall_rule=suite.overall_rule))
        # the per-image scores behind each row: what `--check` pairs a fresh run with
        scores = write_scores(scores_path(leaderboard_dir, suite.name), all_tables, runs, suite.name, metric, provenance)
        kept = readings.write()  # what the engine read in each image, for later checks
        result.written = [md, csv_path, *([contrasts_csv] if contrasts else []), scores, *([kept] if kept else []), *further,
                          *(p for _, p in fresh)]
        discard_partial(records_path)  # every row is filed: the side files that let a rerun resume go now
        return result
    finally:
        readings.close()  # the engine is cached per process: the next run starts with its memo as built


def with_ceiling(sources_by_steps: dict[int, list]) -> dict[int, list]:
    """The figures' sources per budget, the ceiling added to every budget's: it is evaluated once (under
    the first budget) but each budget's image grid shows it, as the reference to look at."""
    ceilings = [s for sources in sources_by_steps.values() for s in sources if s.spec.partition(":")[0] == "ceiling"][:1]
    return {steps: [*sources, *(c for c in ceilings if c not in sources)] for steps, sources in sources_by_steps.items()}


def _images_dir(root: Path | None, backbone: str, steps: int, spec: str) -> Path | None:
    """compare's --save-images folder of one row: ROOT/<backbone>-n<steps>-<spec with / and : made safe>."""
    if root is None:
        return None
    import re

    return Path(root) / f"{backbone}-n{steps}-{re.sub(r'[^A-Za-z0-9._-]+', '_', spec).strip('_')}"


_FIGURE_KINDS = ("schedules", "images", "training")


def figure_links(leaderboard_dir: Path, suite: str) -> list[tuple[str, Path]]:
    """(title, path) of every `figures/<suite>-<backbone>-n<steps>-<kind>.png`, by backbone, budget, kind."""
    found = []
    for path in (Path(leaderboard_dir) / "figures").glob(f"{suite}-*-n*-*.png"):
        head, _, kind = path.stem.rpartition("-")
        name, _, budget = head.rpartition("-n")
        backbone = name[len(suite) + 1 :]
        if kind in _FIGURE_KINDS and budget.isdigit() and backbone:
            title = f"{backbone} · {budget} steps · {kind}" + (" (image 0 of each prompt)" if kind == "images" else "")  # write_figures' grid seed
            found.append(((backbone, int(budget), _FIGURE_KINDS.index(kind)), title, path))
    return [(title, path) for _, title, path in sorted(found, key=lambda f: f[0])]


def write_figures(backbone, suite, sources_by_steps: dict[int, list], policies_dir: Path, leaderboard_dir: Path) -> list[tuple[str, Path]]:
    """Schedules, their spread, image grids and training curves for each budget; one prompt per task."""
    from jsbench.report.plots import plot_image_grid, plot_schedules, plot_training_curves, unique_labels
    from jsbench.train.reinforce import read_log

    items = suite.items("test")
    prompts = list({it.task: it.prompt for it in items}.values())[:6]
    passed = suite_verdicts(suite, items)
    out = []
    fig_dir = leaderboard_dir / "figures"
    for steps, sources in sources_by_steps.items():
        stem = f"{suite.name}-{backbone.name}-n{steps}"
        budget = [s for s in sources if s.steps == steps]
        head = f"{backbone.name} · {steps} steps"
        out.append((f"{head} · schedules", plot_schedules(backbone, budget, prompts, [0, 1, 2, 3], fig_dir / f"{stem}-schedules.png", title=f"{head} · schedules")))
        out.append((f"{head} · images (image 0 of each prompt)", plot_image_grid(backbone, sources, prompts, 0, fig_dir / f"{stem}-images.png", passed, title=head)))
        logs = {}
        for s, label in zip(budget, unique_labels(budget)):
            if s.spec.startswith("policy:"):
                log = Path(s.spec.partition(":")[2]) / "train_log.jsonl"
                if log.exists():
                    logs[label] = read_log(log)
        if logs:
            out.append((f"{head} · training", plot_training_curves(logs, fig_dir / f"{stem}-training.png", title=f"{head} · training")))
    return out


def suite_verdicts(suite, items):
    """`passed(images, prompts) -> [bool | None]` for the image grids: the suite's primary metric per
    image where it is a pass/fail verdict (GenEval's `correct`), None where it is a score (HPSv2)."""
    by_prompt = {}
    for it in items:
        by_prompt.setdefault(it.prompt, it)
    metric = suite.primary_metric

    def passed(images, prompts):
        values = [sc.get(metric) for sc in suite.score(images, [by_prompt[p] for p in prompts])]
        return [bool(v) if v in (0, 1) else None for v in values]

    return passed

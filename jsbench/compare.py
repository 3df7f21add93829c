"""`compare`: evaluate the default schedule, the shipped policies and the ceiling side by side, append
records, render the leaderboard, and optionally check it against the committed one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jsbench import JsbenchError
from jsbench.evaluate import discard_partial, evaluate, resolve_schedule
from jsbench.leaderboard import Regression, Table, build_tables, check_regressions, read_committed, render_csv, render_markdown, write_text_atomic
from jsbench.policy import read_manifest
from jsbench.results import append_records, make_records, read_records


@dataclass
class CompareResult:
    tables: list[Table]
    regressions: list[Regression] = field(default_factory=list)
    compared: int = 0
    written: list[Path] = field(default_factory=list)


def shipped_policies(policies_dir: Path, backbone: str, steps: int) -> list[Path]:
    """Policy folders under policies_dir/<backbone>/ whose manifest matches the backbone and budget."""
    root = Path(policies_dir) / backbone
    found = []
    for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        m = read_manifest(manifest.parent)
        if m.get("backbone") == backbone and m.get("steps") == steps:
            found.append(manifest.parent)
    return found


def run_compare(
    backbone,
    suite,
    steps_list: list[int],
    policies_dir: Path = Path("policies"),
    records_path: Path = Path("results/records.jsonl"),
    leaderboard_dir: Path = Path("leaderboards"),
    seeds: int = 16,
    check: bool = False,
    tolerance: float = 2.0,
    extra_schedules: list[str] = (),
    progress: bool = True,
    command: str = "jsbench compare",
    log=print,
) -> CompareResult:
    committed = read_committed(leaderboard_dir / f"{suite.name}.csv") if check else []
    if check and not committed:
        raise JsbenchError(f"--check needs a committed leaderboard at {leaderboard_dir / (suite.name + '.csv')}")
    ceiling_done = False
    for steps in steps_list:
        specs = ["default", *extra_schedules] + [f"policy:{p}" for p in shipped_policies(policies_dir, backbone.name, steps)]
        if not ceiling_done:
            specs.append("ceiling")
            ceiling_done = True
        reference = None
        for spec in specs:
            source = resolve_schedule(spec, backbone, steps)
            run = evaluate(backbone, suite, source, seeds_per_prompt=seeds, progress=progress, out=records_path)
            if spec == "default":
                reference = run
            paired = reference if source.steps == steps and spec != "default" else None
            append_records(records_path, make_records(backbone, suite, source, run, reference=paired))
            discard_partial(records_path)
            log(f"  {source.label:<22} {steps if source.steps == steps else source.steps:>4} steps  done")
    records = [r for r in read_records(records_path) if r.backbone == backbone.name]
    metric = suite.primary_metric
    tables = [t for t in build_tables(records, suite.name, metric) if t.steps in steps_list]
    result = CompareResult(tables=tables)
    if check:
        result.regressions, result.compared = check_regressions(committed, tables, tolerance)
        return result
    # the leaderboard files hold every (backbone, steps) table recorded so far, fresh ones included
    all_tables = build_tables(read_records(records_path), suite.name, metric)
    md = leaderboard_dir / f"{suite.name}.md"
    csv_path = leaderboard_dir / f"{suite.name}.csv"
    write_text_atomic(md, render_markdown(all_tables, suite.name, metric, command))
    write_text_atomic(csv_path, render_csv(all_tables))
    result.written = [md, csv_path]
    return result

"""Leaderboards: Markdown and CSV tables rendered from records (the CI regression check is jsbench.report.regression_check).

One table per (backbone, model, steps): a row per method, per-task columns, the overall score with
its standard error, and the paired difference to the default schedule. A cross-budget table puts
the overall score of each method at every step budget side by side.

Every overall value and paired difference carries the degrees of freedom of its SE (jsbench.stats) and
its 95 % Student-t interval: in the CSV for every row (`df`, `ci_low`, `ci_high` and the same for
`delta_` and `delta_global_`), on the page beside the ± of learned rows, whose few training seeds make
the interval much wider than ±2 SE.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from jsbench import JsbenchError
from jsbench.report.contrasts import contrast_lines
from jsbench.evaluation.results import PROVENANCE_FIELDS, Record, latest, paired_estimates
from jsbench.stats import SE_LEGEND, T_LEGEND, TWO_LEVEL_LEGEND, t_interval
from jsbench.suites.base import TASK_MEAN_RULE
from jsbench.zoo.registry import zoo_rank

METHOD_ORDER = ["default", "uniform", "global", "js", "js (prompt-only)", "js-plugin", "rloo", "xctx", "tpdm (js)", "indis", "none"]


def method_rank(method: str) -> tuple:
    """The sort key of a row's method, the order leaderboards and check reports list rows in: default and the
    hand-made schedules, the schedule zoo, learned and distilled rows, the ceiling last."""
    if method in METHOD_ORDER:
        return (0, METHOD_ORDER.index(method), method)
    if method.startswith("shift"):
        return (0, 1.5, method)
    zoo = zoo_rank(method.split(" ")[0].split(":")[0])  # each zoo row's declared order (jsbench/zoo/registry.py)
    if zoo is not None:  # the schedule zoo (jsbench/zoo/): after the hand-made rows, before the learned ones
        return (0, 1.6 + 0.05 * zoo, method)
    if method.startswith("ceiling"):
        return (2, 0, method)
    return (1, 0, method)  # distilled samplers and anything else, between learned rows and the ceiling


def _fmt(value: float | None, stderr: float | None = None, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    if stderr is not None and not (isinstance(stderr, float) and math.isnan(stderr)):
        text += f" ± {stderr:.3f}"
    return text


def interval(value: float | None, stderr: float | None, df: float | None) -> tuple[float | None, float | None]:
    """The 95 % Student-t interval of a value with its SE and df (jsbench.stats.t_interval); (None, None)
    where any of them is unknown (an older CSV without df)."""
    if value is None or stderr is None or df is None or any(math.isnan(x) for x in (value, stderr, df)):
        return None, None
    return t_interval(value, stderr, df)


def shows_interval(row: dict) -> bool:
    """Whether the page shows a row's t intervals beside its ±: learned rows, whose training-seed term has
    few df (another row's interval is ±2 SE to the printed digit: its prompts give it tens of df)."""
    return bool(row.get("train_seeds"))


# (value, stderr, df) keys of each uncertain number a row carries: overall, Δ vs default, Δ vs global
ROW_NUMBERS = {"": ("overall", "stderr", "df"), "delta_": ("delta", "delta_stderr", "delta_df"),
               "delta_global_": ("delta_global", "delta_global_stderr", "delta_global_df")}


def row_interval(row: dict, prefix: str = "") -> tuple[float | None, float | None]:
    """A row's 95 % t interval of its overall (prefix ""), Δ vs default ("delta_") or Δ vs global
    ("delta_global_"): as its CSV wrote it when read from one (recomputed from the rounded value, SE and
    df it would move in the last digit), else from its value, SE and df."""
    written = (row.get("intervals") or {}).get(prefix)
    if written is not None:
        return written
    value, stderr, df = ROW_NUMBERS[prefix]
    return interval(row.get(value), row.get(stderr), row.get(df))


def row_cell(row: dict, prefix: str = "", sep: str = " ") -> str:
    """The page's cell of a row's overall (prefix ""), Δ vs default ("delta_") or Δ vs global ("delta_global_"):
    value ± SE, and for a learned row its 95 % t interval."""
    value, stderr, _ = ROW_NUMBERS[prefix]
    text = _fmt(row.get(value), row.get(stderr), signed=bool(prefix))
    lo, hi = row_interval(row, prefix) if shows_interval(row) and text != "–" and row.get(stderr) is not None else (None, None)
    if lo is None:
        return text
    return text + sep + (f"[{lo:+.3f}, {hi:+.3f}]" if prefix else f"[{lo:.3f}, {hi:.3f}]")


@dataclass
class Table:
    backbone: str
    model_id: str
    steps: int
    tasks: list[str]
    rows: list[dict]  # method, steps, per-task values, overall, stderr, delta, delta_stderr, n_images
    command: str = ""  # the command that made this section (shown on the page, kept in the CSV)
    provenance: dict = field(default_factory=dict)  # detector, colour model, prompt set, OCR engine, reward model
    seed_base: int | None = None  # image k of prompt p from noise_seed(p, seed_base + k); None: shared seeds (older pages)

    @property
    def key(self) -> tuple:
        return (self.backbone, self.model_id, self.steps, provenance_key(self.provenance))


def provenance_key(provenance: dict) -> tuple[str, ...]:
    """Provenance as a sortable tuple in PROVENANCE_FIELDS order ("" where it does not apply)."""
    return tuple(str(provenance.get(f) or "") for f in PROVENANCE_FIELDS)


def provenance_text(provenance: dict) -> str:
    """One line for a section header: what scored its rows."""
    names = {"detector": "detector", "color_model": "colour model", "prompt_set": "prompts sha256", "ocr_engine": "OCR engine", "reward_model": "reward model",
             "guidance": "guidance scale", "protocol": "protocol"}
    parts = [f"{names[f]} `{provenance[f]}`" for f in PROVENANCE_FIELDS if provenance.get(f) and f != "guidance"]
    if provenance.get("detector"):  # which detector weights produced the rows
        from jsbench.rewards.detectors import detector_weights

        weights = detector_weights(provenance["detector"])
        parts[0] += f" ({weights})" if weights else ""
    text = "Scored by " + ", ".join(parts) + "." if parts else ""
    if provenance.get("guidance"):
        text = (text + " " if text else "") + f"Sampled at guidance scale `{provenance['guidance']}`."
    return text


def unofficial_detectors(tables: list["Table"], suite: str) -> list[str]:
    """The detectors of a GenEval page that do not run GenEval's own weights (mmdet's Mask2Former Swin-S,
    through mmdet or converted to transformers)."""
    from jsbench.rewards.detectors import OFFICIAL_DETECTOR_ID

    if suite != "geneval":
        return []
    from jsbench.rewards.detectors import detector_weights

    found = {t.provenance.get("detector") or "unrecorded" for t in tables} - {OFFICIAL_DETECTOR_ID}
    return sorted(d for d in found if not detector_weights(d).startswith("GenEval's official"))


def build_tables(records: list[Record], suite: str, metric: str) -> list[Table]:
    recs = [r for r in latest(records) if r.suite == suite and r.metric == metric]
    everywhere = [r for r in recs if r.budget is None]  # reference rows (the ceiling): in every section of their backbone
    # one section per budget; rows scored with another detector, colour model, prompt set, OCR engine or reward
    # model are another section
    budgets = sorted({(r.backbone, r.model_id, r.budget, provenance_key(r.provenance())) for r in recs if r.budget is not None})
    tables = []
    for backbone, model_id, budget, prov in budgets:
        here = [r for r in recs if (r.backbone, r.model_id, r.budget, provenance_key(r.provenance())) == (backbone, model_id, budget, prov)]
        here += [r for r in everywhere if (r.backbone, r.model_id, provenance_key(r.provenance())) == (backbone, model_id, prov)]
        tasks = list(dict.fromkeys(r.task for r in here if r.task != "overall"))
        rows = []
        for method in sorted({r.method for r in here}, key=method_rank):
            by_task = {r.task: r for r in here if r.method == method}
            overall = by_task.get("overall")
            if overall is None:
                continue
            rows.append(
                {
                    "method": method,
                    "steps": overall.row_steps,
                    **{t: by_task[t].value if t in by_task else None for t in tasks},
                    "overall": overall.value,
                    "stderr": overall.stderr,
                    "delta": overall.delta_vs_default,
                    "delta_stderr": overall.delta_stderr,
                    "df": overall.df,  # of stderr and delta_stderr (None: not recorded)
                    "delta_df": overall.delta_df,
                    "n_images": overall.n_images,
                    "train_seeds": overall.train_seeds,  # a learned row: the training seeds it averages (None: not learned)
                    "converged": overall.converged,  # a learned row: its seed-averaged held-out curve stopped moving (None: not judged)
                    "shared_noise": overall.shared_noise,  # a learned row whose seeds shared one noise stream
                    # per task, and overall: (prompts, images) the row averages over
                    "counts": {t: (r.n_prompts, r.n_images) for t, r in by_task.items()},
                }
            )
        bases = {r.seed_base for r in here if r.noise}
        tables.append(Table(backbone, model_id, budget, tasks, rows, provenance={f: v for f, v in zip(PROVENANCE_FIELDS, prov) if v},
                            seed_base=bases.pop() if len(bases) == 1 else None))
    return tables


NOT_CONVERGED_MARK = "†"
NOT_CONVERGED_LEGEND = ("† not converged: its held-out score, averaged over its training seeds, still rose or fell over the "
                        "last half of training by more than the margin (jsbench/policy/convergence.py).")
SHARED_NOISE_MARK = "‡"
SHARED_NOISE_LEGEND = ("‡ its training seeds shared one noise stream (trained before seeds were independent; manifest "
                       "`noise_stream`): the seed spread leaves that stream's variability out, so its ± may be too small.")
NOT_JUDGED_LEGEND = "Learned rows without † or a verdict in the CSV are not judged: a training seed has no held-out curve (heldout.jsonl)."


def method_cell(row: dict) -> str:
    """The row's method, marked † when its held-out curve had not settled and ‡ when its training seeds
    shared one noise stream."""
    return (row["method"] + (f" {NOT_CONVERGED_MARK}" if row.get("converged") is False else "")
            + (f" {SHARED_NOISE_MARK}" if row.get("shared_noise") else ""))


def table_legend(t: Table) -> list[str]:
    """The lines under a table: what its ± is, how learned rows of several seeds count, what their interval
    is, the convergence mark."""
    out = [SE_LEGEND]
    if any((row.get("train_seeds") or 1) > 1 for row in t.rows):
        out.append(TWO_LEVEL_LEGEND)
    if any(shows_interval(row) and row_interval(row)[0] is not None for row in t.rows):
        out.append(T_LEGEND)
    if any(row.get("converged") is False for row in t.rows):
        out.append(NOT_CONVERGED_LEGEND)
    if any(row.get("shared_noise") for row in t.rows):
        out.append(SHARED_NOISE_LEGEND)
    if any(row.get("converged") is None and row.get("train_seeds") for row in t.rows):
        out.append(NOT_JUDGED_LEGEND)
    return out


def noise_text(t: Table) -> str:
    """One line for a section header: where its images' noise comes from."""
    if t.seed_base is None:
        return ""
    return f"Noise: image k of prompt p starts from seed sha256(p, {t.seed_base} + k), the same for every row."


def render_markdown(tables: list[Table], suite: str, metric: str, command: str, extra: str = "", contrasts: list[dict] = (),
                    overall_rule: str = TASK_MEAN_RULE) -> str:
    """The page of suite `suite` (its name): `command` regenerates all of it; each section names the command that
    made it; under a section's table its headline contrasts (`jsbench.report.contrasts`), where given. `overall_rule`:
    how the suite makes its overall score, as its class declares it (`Suite.overall_rule`)."""

    out = [f"# {suite} leaderboard", "", f"Metric: `{metric}` ({overall_rule}). Regenerate every section: `{command}`.", ""]
    others = unofficial_detectors(tables, suite)
    if others:
        out += [f"**Detector:** {', '.join(f'`{d}`' for d in others)}, not GenEval's official detector (mmdet's Mask2Former "
                "Swin-S). Rows compare with each other, not with published GenEval tables.", ""]
    for t in tables:
        partial = re.search(r"--limit (\d+)", t.command or "")
        out += [f"## {t.backbone} · {t.model_id} · {t.steps} steps" + (" · partial" if partial else ""), ""]
        if partial:  # `compare --limit N`: a subset of the suite's prompts, not comparable with full sections
            out += [f"**Partial:** the first {partial.group(1)} prompts of each task only.", ""]
        if t.command:
            out += [f"Made by `{t.command}`.", ""]
        if provenance_text(t.provenance):
            out += [provenance_text(t.provenance), ""]
        if section_counts(t):
            out += [section_counts(t), ""]
        if noise_text(t):
            out += [noise_text(t), ""]
        header = ["method", "steps", "train seeds", *t.tasks, "overall", "Δ vs default", "Δ vs global"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] * len(header)) + "|")
        for row in t.rows:
            cells = [method_cell(row), str(row["steps"]), str(row["train_seeds"]) if row.get("train_seeds") else "", *[_fmt(row[k]) for k in t.tasks],
                     row_cell(row), row_cell(row, "delta_"), row_cell(row, "delta_global_")]
            out.append("| " + " | ".join(cells) + " |")
        out += ["", *table_legend(t), ""]
        mine = [c for c in contrasts if (c["backbone"], c["model_id"], int(c["steps"])) == (t.backbone, t.model_id, int(t.steps))]
        if mine:
            out += [*contrast_lines(mine), ""]
    cross = cross_budget(tables)
    if cross:
        out += cross
    if extra:
        out += [extra, ""]
    return "\n".join(out)


def section_counts(t: Table) -> str:
    """'Prompts/images per task: ...' for a section, from its default row (or its first row with counts)."""
    rows = sorted((r for r in t.rows if r.get("counts")), key=lambda r: r["method"] != "default")
    if not rows:
        return ""
    counts = rows[0]["counts"]
    parts = [f"{task} {counts[task][0]}/{counts[task][1]}" for task in [*t.tasks, "overall"] if task in counts and counts[task][0] is not None]
    return "Prompts/images per task (every row is scored on the same ones): " + ", ".join(parts) + "." if parts else ""


def add_reference_deltas(tables: list[Table], run_of, suite, reference: str = "global") -> None:
    """Give every row of a section the paired difference of its overall score to the section's `reference`
    row (the learned global schedule): `delta_global`, its standard error and df, from per-image differences
    over the same prompts and seeds, aggregated as the suite aggregates scores. `run_of(table, row)` is
    the row's per-image run (an EvalRun) or None; rows without one, or not on the reference's prompts
    and seeds, get none."""
    metric = suite.primary_metric
    for t in tables:
        ref_row = next((r for r in t.rows if r["method"] == reference), None)
        ref = run_of(t, ref_row) if ref_row is not None else None
        if ref is None:
            continue
        for row in t.rows:
            run = run_of(t, row) if row is not ref_row else None
            paired = paired_estimates(suite, run, ref) if run is not None else None
            if paired and ("overall", metric) in paired:
                est = paired[("overall", metric)]
                row["delta_global"], row["delta_global_stderr"], row["delta_global_df"] = est.value, est.stderr, est.df


def cross_budget(tables: list[Table]) -> list[str]:
    """Overall score of each method at each step budget (one table per backbone), like the paper's."""
    out = []
    for backbone, model_id, prov in dict.fromkeys((t.backbone, t.model_id, provenance_key(t.provenance)) for t in tables):
        mine = sorted((t for t in tables if (t.backbone, t.model_id, provenance_key(t.provenance)) == (backbone, model_id, prov)), key=lambda t: t.steps)
        if len(mine) < 2:
            continue
        methods = sorted({r["method"] for t in mine for r in t.rows}, key=method_rank)
        out += [f"## {backbone} · {model_id} · across step budgets", ""]
        out.append("| method | " + " | ".join(f"{t.steps} steps" for t in mine) + " |")
        out.append("|---|" + "|".join("---" for _ in mine) + "|")
        for m in methods:
            cells = []
            for t in mine:
                row = next((r for r in t.rows if r["method"] == m), None)
                cells.append(row_cell(row) if row else "–")
            out.append(f"| {m} | " + " | ".join(cells) + " |")
        shown = any(shows_interval(r) and row_interval(r)[0] is not None for t in mine for r in t.rows)
        out += ["", SE_LEGEND, *([T_LEGEND] if shown else []), ""]
    return out


CI_FIELDS = ["df", "ci_low", "ci_high", "delta_df", "delta_ci_low", "delta_ci_high", "delta_global_df", "delta_global_ci_low", "delta_global_ci_high"]
CSV_FIELDS = ["backbone", "model_id", "steps", "method", "task", "value", "stderr", "delta", "delta_stderr", "n_images", "budget", "command", *PROVENANCE_FIELDS,
              "n_prompts", "delta_global", "delta_global_stderr", "train_seeds", "converged", "seed_base", *CI_FIELDS, "shared_noise"]
# `steps` is the row's own budget (200 for the ceiling row), `budget` the section's; `command` made the section;
# `n_images` and `n_prompts` are the line's own task's; `delta_global` (overall lines) is paired vs the global row;
# `train_seeds`: the training seeds a learned row averages; `converged`: true/false from its seed-averaged held-out
# curve ("" not judged); `seed_base`: image k of prompt p from noise_seed(p, seed_base + k) ("": an older page's shared seeds);
# `df`, `ci_low`, `ci_high` (overall lines): the df of `stderr` and the 95 % Student-t interval of `value`
# (jsbench.stats: prompts - 1, or for a learned row the Satterthwaite df of its prompt and seed terms); the
# same for `delta` (`delta_df`, ...) and `delta_global` (`delta_global_df`, ...); "" where not recorded
# (columns added last: readers by position of the earlier ones are unaffected, older CSVs lack them);
# `shared_noise`: "true" for a learned row whose training seeds shared one noise stream (‡)


def render_csv(tables: list[Table]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for t in tables:
        for row in t.rows:
            for task in [*t.tasks, "overall"]:
                value = row["overall"] if task == "overall" else row[task]
                writer.writerow(
                    [t.backbone, t.model_id, row["steps"], row["method"], task, _num(value),
                     _num(row["stderr"]) if task == "overall" else "", _num(row["delta"]) if task == "overall" else "",
                     _num(row["delta_stderr"]) if task == "overall" else "", _count(row, task, 1), t.steps, t.command,
                     *provenance_key(t.provenance), _count(row, task, 0),
                     _num(row.get("delta_global")) if task == "overall" else "", _num(row.get("delta_global_stderr")) if task == "overall" else "",
                     row.get("train_seeds") or "", "" if row.get("converged") is None else str(bool(row["converged"])).lower(),
                     "" if t.seed_base is None else t.seed_base, *(_ci_cells(row) if task == "overall" else [""] * len(CI_FIELDS)),
                     "true" if row.get("shared_noise") else ""]
                )
    return buf.getvalue()


def _ci_cells(row: dict) -> list[str]:
    """The CI_FIELDS of a row's overall line: df, ci_low, ci_high of the value, Δ vs default and Δ vs global."""
    out = []
    for prefix, (_, _, df) in ROW_NUMBERS.items():
        lo, hi = row_interval(row, prefix)
        out += [_num(row.get(df)), _num(lo), _num(hi)]
    return out


def _count(row: dict, task: str, which: int) -> int | str:
    """The row's number of prompts (which=0) or images (1) for `task`; the overall images of rows that
    carry no per-task counts (read from an older CSV)."""
    counts = row.get("counts") or {}
    if task in counts and counts[task][which] is not None:
        return counts[task][which]
    return row.get("n_images") if (which == 1 and task == "overall" and row.get("n_images") is not None) else ""


def _int(text: str | None) -> int | None:
    return int(float(text)) if text not in (None, "") else None


def _float(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def tables_from_csv(rows: list[dict]) -> list[Table]:
    """The tables a leaderboard CSV holds (what `render_csv` wrote), so a run can keep the sections it did
    not evaluate. A CSV without the `budget` column (older pages) files each ceiling row under the budget of
    the rows just before it, which is where `render_csv` wrote it."""
    groups: dict[tuple, dict] = {}
    budget_of: dict[tuple, int] = {}
    for r in rows:
        bm = (r["backbone"], r["model_id"])
        if r.get("budget"):
            budget = int(r["budget"])
        elif r["method"].startswith("ceiling") and bm in budget_of:
            budget = budget_of[bm]
        else:
            budget = int(r["steps"])
        budget_of[bm] = budget
        prov = {f: r[f] for f in PROVENANCE_FIELDS if r.get(f)}  # older CSVs have no provenance columns
        g = groups.setdefault((*bm, budget, provenance_key(prov)), {"tasks": [], "rows": {}, "command": r.get("command") or "", "provenance": prov,
                                                                    "seed_base": _int(r.get("seed_base"))})
        row = g["rows"].setdefault(r["method"], {"method": r["method"], "steps": int(r["steps"]), "train_seeds": _int(r.get("train_seeds")),
                                                 "converged": {"true": True, "false": False}.get(r.get("converged") or ""),
                                                 "shared_noise": r.get("shared_noise") == "true" or None})
        if r.get("n_prompts") or r.get("n_images"):  # per line, as written (CSVs without n_prompts repeated the overall n_images)
            row.setdefault("counts", {})[r["task"]] = (_int(r.get("n_prompts")), _int(r.get("n_images")))
        if r["task"] == "overall":
            row.update(overall=float(r["value"]), stderr=_float(r["stderr"]), delta=_float(r["delta"]),
                       delta_stderr=_float(r["delta_stderr"]), n_images=int(r["n_images"]) if r.get("n_images") else None,
                       delta_global=_float(r.get("delta_global")), delta_global_stderr=_float(r.get("delta_global_stderr")),
                       df=_float(r.get("df")), delta_df=_float(r.get("delta_df")), delta_global_df=_float(r.get("delta_global_df")),
                       intervals={prefix: (_float(r.get(f"{prefix}ci_low")), _float(r.get(f"{prefix}ci_high"))) for prefix in ROW_NUMBERS
                                  if r.get(f"{prefix}ci_low") and r.get(f"{prefix}ci_high")})
        else:
            if r["task"] not in g["tasks"]:
                g["tasks"].append(r["task"])
            row[r["task"]] = _float(r["value"])
    tables = []
    for (backbone, model_id, budget, _), g in groups.items():
        kept = [{**{t: None for t in g["tasks"]}, **row} for row in g["rows"].values() if "overall" in row]
        tables.append(Table(backbone, model_id, budget, g["tasks"], kept, g["command"], g["provenance"], g["seed_base"]))
    return tables


def merge_tables(kept: list[Table], fresh: list[Table], unrecorded: dict | None = None) -> list[Table]:
    """`kept` with every (backbone, model, steps) section that `fresh` has replaced by the fresh one, in a
    fixed order (by backbone, model, steps), so a run never drops what it did not evaluate. `unrecorded`: the
    provenance a kept section made before the suite recorded a field was made with (the ocr suite's
    `unrecorded_provenance`: protocol words), so a fresh section of another protocol sits beside it."""
    unrecorded = unrecorded or {}

    # a kept section written before a provenance field was recorded (none at all, or before guidance) is
    # superseded by a fresh one of its budget that agrees on every field the kept one has; one without a
    # guidance ran at the pipeline's own, so only a fresh section at the pipeline's own (no --guidance in
    # its command) supersedes it
    def superseded(old: Table) -> bool:
        return any(new.key[:3] == old.key[:3]
                   and all(str(new.provenance.get(f) or "") == str(v or "") for f, v in {**unrecorded, **old.provenance}.items())
                   and (old.provenance.get("guidance") or "--guidance" not in new.command)
                   for new in fresh)

    merged = {t.key: t for t in kept if not superseded(t)}
    merged.update({t.key: t for t in fresh})
    return [merged[k] for k in sorted(merged)]


def _num(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.6f}"


REQUIRED_CSV_FIELDS = ("backbone", "model_id", "steps", "method", "task", "value")
_INT_FIELDS = ("steps", "budget", "n_images", "n_prompts")
_FLOAT_FIELDS = ("value", "stderr", "delta", "delta_stderr", "delta_global", "delta_global_stderr", *CI_FIELDS)


def read_committed(path: str | Path, fields: list[str] | None = None) -> list[dict]:
    """The rows of a leaderboard CSV (none when the file does not exist; `fields`: its known columns, default
    CSV_FIELDS), validated: a damaged file (no
    header, an unknown column, a row with too few or too many fields, a value that is not a number where
    one belongs, a last row cut short without its newline) is refused in one line naming the line, so a
    check never runs against half a leaderboard."""
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text:
        return []
    fix = "restore it (git checkout) or regenerate it (jsbench compare --all)"
    header = next(csv.reader(io.StringIO(text.partition("\n")[0])), [])
    missing = [f for f in REQUIRED_CSV_FIELDS if f not in header]
    if missing:
        raise JsbenchError(f"{path}:1: not a leaderboard header (no {', '.join(missing)} column); {fix}")
    unknown = [f for f in header if f not in (CSV_FIELDS if fields is None else fields)]
    if unknown:
        raise JsbenchError(f"{path}:1: unknown column {unknown[0]!r}; {fix}")
    if not text.endswith("\n"):
        raise JsbenchError(f"{path}:{text.count(chr(10)) + 1}: the last row is cut short (no final newline); {fix}")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = []
    for row in reader:
        where = f"{path}:{reader.line_num}"
        if None in row or None in row.values():
            n = len(row.get(None) or []) + sum(v is not None for k, v in row.items() if k is not None)
            raise JsbenchError(f"{where}: {n} fields, the header has {len(header)}; {fix}")
        for f in _INT_FIELDS + _FLOAT_FIELDS:
            value = row.get(f)
            if value:
                try:
                    float(value) if f in _FLOAT_FIELDS else int(float(value))
                except ValueError:
                    raise JsbenchError(f"{where}: {f} is {value!r}, not a number; {fix}") from None
        if row["task"] == "overall" and not row["value"]:
            raise JsbenchError(f"{where}: the overall value is empty; {fix}")
        rows.append(row)
    return rows

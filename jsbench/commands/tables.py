"""What the terminal shows: every table of the `jsbench` commands, built in one place.

Each function takes the library's results (records, leaderboard tables, a check report, policy rows) and
returns a rich Table or exact CSV / JSON text; the CLI only prints them. The leaderboard files themselves
(markdown and CSV) are rendered by report/leaderboard.py, whose CSV the `--format csv` of compare reuses.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path

from rich import box
from rich.markup import escape
from rich.table import Table as RichTable

COMPARE_FOOTNOTE = "overall = mean of the task means (ocr: every image pooled); --tasks adds a column per task, --format csv|json gives every value"
CHECK_STYLES = {"regressed": "red", "missing": "yellow", "improved": "green"}


def plain_table(title: str | None = None, caption: str | None = None) -> RichTable:
    """A plain table: no side borders, so narrow terminals keep their columns for the values."""
    return RichTable(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left", caption_justify="left")


def rows_text(fmt: str, columns, rows: list[dict]) -> str:
    """Rows as exact CSV or JSON text (`fmt` "csv" or "json"; only `columns`; None is empty in CSV, null in JSON)."""
    if fmt == "json":
        return json.dumps([{c: (str(r[c]) if isinstance(r[c], Path) else r[c]) for c in columns} for r in rows], indent=1) + "\n"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow(["" if r[c] is None else r[c] for c in columns])
    return buf.getvalue()


# --- jsbench eval ---------------------------------------------------------------------------------------


def records_text(fmt: str, records) -> str:
    """`eval --format csv|json`: every field of every record, exact (CSV leaves out the seed list)."""
    rows = [asdict(r) for r in records]
    columns = [c for c in rows[0] if c != "seeds"] if fmt == "csv" else list(rows[0])
    return rows_text(fmt, columns, rows)


def eval_table(records, suite: str, backbone: str, source) -> RichTable:
    """`eval`'s table: each task's value ± SE of one schedule."""
    from jsbench.stats import SE_LEGEND

    table = plain_table(f"{suite} · {backbone} · {source.label} · {source.steps} steps", caption=SE_LEGEND)
    for col in ("task", "metric", "value ± SE", "prompts", "images"):
        table.add_column(col, overflow="fold", justify="left" if col in ("task", "metric") else "right")
    for r in records:
        table.add_row(r.task, r.metric, f"{r.value:.3f} ± {r.stderr:.3f}", str(r.n_prompts), str(r.n_images))
    return table


# --- jsbench compare ------------------------------------------------------------------------------------


def sections_text(fmt: str, tables, suite: str) -> str:
    """`compare --format csv|json`: the evaluated sections, every value exact (CSV: the leaderboard's)."""
    if fmt == "csv":
        from jsbench.report.leaderboard import render_csv

        return render_csv(tables)
    sections = [{"suite": suite, "backbone": t.backbone, "model_id": t.model_id, "steps": t.steps, "command": t.command, "tasks": t.tasks, "rows": t.rows} for t in tables]
    return json.dumps(sections, indent=1) + "\n"


def compare_tables(tables, suite: str, tasks: bool = False) -> list[RichTable]:
    """A narrow table (80 columns) per evaluated section; `tasks` adds a column per task. A learned row's
    95 % t interval sits under its value ± SE (a second line, so the columns keep their width)."""
    out = []
    for t in tables:
        from jsbench.report.leaderboard import method_cell, row_cell, table_legend

        vs_global = any(row.get("delta_global") is not None for row in t.rows)
        # escaped: rich reads the interval legend's "[lo, hi]" as a style tag
        table = plain_table(f"{suite} · {t.backbone} · {t.steps} steps", caption=escape("\n".join(table_legend(t))))
        for col in ["method", "steps", *(t.tasks if tasks else []), "overall ± SE", "Δ vs default", *(["Δ vs global"] if vs_global else [])]:
            table.add_column(col, overflow="fold", justify="left" if col == "method" else "right")
        for row in t.rows:
            cells = [f"{row[k]:.3f}" if row[k] is not None else "–" for k in t.tasks] if tasks else []
            table.add_row(method_cell(row), str(row["steps"]), *cells, row_cell(row, sep="\n"), row_cell(row, "delta_", sep="\n"),
                          *([row_cell(row, "delta_global_", sep="\n")] if vs_global else []))
        out.append(table)
    return out


CHECK_COLUMNS = ("verdict", "N", "method / task", "was", "now", "Δ ± SE", "allowed", "images")
_CHECK_FIXED = {"verdict": 9, "N": 3, "was": 5, "now": 5, "Δ ± SE": 9, "allowed": 7, "images": 8}  # never folded


def check_table(report) -> RichTable | None:
    """`compare --check`: the committed rows that moved or are missing (None when every one is unchanged).
    Fits 80 columns by wrapping, never by cutting: each row takes two lines (the method over its task, Δ
    over its SE, the images that rose and fell over their count), and a long method name folds."""
    shown = [r for r in report.rows if r.verdict != "unchanged" or r.changed]
    if not shown:
        return None
    from jsbench.report.regression_reports import CHECK_LEGEND

    table = plain_table(title=f"committed rows that moved or are missing (tolerance {report.tolerance:g} × SE of the paired Δ)",
                        caption="N: steps; was: committed; now: this run; allowed: the largest drop that passes; "
                                "images: ↑ rose, ↓ fell, of n; *: unpaired SE (committed without per-image scores); " + CHECK_LEGEND)
    for col in CHECK_COLUMNS:
        width = _CHECK_FIXED.get(col)
        table.add_column(col, overflow="fold", no_wrap=width is not None, min_width=width, max_width=width,
                         justify="left" if col in ("verdict", "method / task") else "right")
    for r in shown:
        se = "" if r.delta_stderr is None else f"\n± {r.delta_stderr:.4f}" + ("" if r.paired else "*")
        images = f"↑{r.images_up} ↓{r.images_down}\nof {r.n_images}" if r.paired else "–"
        table.add_row(r.verdict, str(r.steps), f"{r.method}\n{r.task}", "–" if r.committed is None else f"{r.committed:.3f}",
                      "–" if r.fresh is None else f"{r.fresh:.3f}", ("–" if r.delta is None else f"{r.delta:+.4f}") + se,
                      "–" if r.allowed_drop is None else f"{r.allowed_drop:.4f}", images, style=CHECK_STYLES.get(r.verdict))
    return table


# --- jsbench policies list ------------------------------------------------------------------------------

# csv/json columns: `arch` last, so readers of the earlier columns by position are unaffected
POLICY_COLUMNS = ("path", "backbone", "steps", "kind", "baseline", "reward", "train_seed", "converged", "checksum", "arch")
_POLICY_TABLE_COLUMNS = ("backbone", "steps", "kind", "arch", "baseline", "reward")
# a run's verdict from its own heldout.jsonl (jsbench.policy.convergence), as its manifest's `convergence` once stamped
POLICY_NOT_CONVERGED = "† not converged: its held-out score still rose or fell over the last half of training by more than the margin."
POLICY_NOT_JUDGED = "Runs without heldout.jsonl (trained before held-out curves) are not judged."


def policies_table(rows: list[dict], root: str) -> RichTable:
    """`policies list`: each policy (`_short`: its path under the root, one per training seed: <row>/seed<S>)
    with its backbone, steps, kind, network arch, baseline and reward, marked when its held-out curve says not converged; the training seed,
    convergence and checksum are in `--format csv|json` and `policies show`."""
    from jsbench.report.leaderboard import NOT_CONVERGED_MARK

    notes = [note for note, shown in ((POLICY_NOT_CONVERGED, any(r["converged"] is False for r in rows)),
                                      (POLICY_NOT_JUDGED, any(r["converged"] is None for r in rows))) if shown]
    table = plain_table(title=f"policies in {root}", caption="none" if not rows else " ".join(notes) or None)
    # the backbone column only where a path does not already start with it (policies/<backbone>/...): 80 columns
    columns = [c for c in _POLICY_TABLE_COLUMNS
               if c != "backbone" or any(not str(r["_short"]).startswith(f"{r['backbone']}/") for r in rows)]
    table.add_column("policy", overflow="fold")  # the short columns keep their width; a long path folds
    for col in columns:
        table.add_column(col, no_wrap=True)
    for r in rows:
        name = str(r["_short"]) + (f" {NOT_CONVERGED_MARK}" if r["converged"] is False else "")
        table.add_row(name, *("–" if r[c] is None else str(r[c]) for c in columns))
    return table

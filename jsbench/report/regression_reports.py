"""The regression check's reports, for people and CI systems: Markdown, JSON and JUnit XML, each chosen by
its file's suffix (`--report PATH`, repeatable)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

from jsbench.io import write_text_atomic
from jsbench.report.regression_check import VERDICTS, CheckError, CheckReport, RowCheck, is_nan

REPORT_FORMATS = {".md": "markdown", ".json": "json", ".xml": "junit"}
REPORT_SCHEMA = "jsbench.check/1"

__all__ = ["REPORT_FORMATS", "REPORT_SCHEMA", "CHECK_LEGEND", "report_format", "write_report", "render_markdown", "render_json",
           "render_junit", "report_dict"]


def report_format(path: str | Path) -> str:
    """The report format its suffix names; refuses any other suffix (before anything is evaluated)."""
    suffix = Path(path).suffix.lower()
    if suffix not in REPORT_FORMATS:
        raise CheckError(f"--report {str(path)!r}: the suffix names the format; use .md (Markdown), .json or .xml (JUnit)")
    return REPORT_FORMATS[suffix]


def _f(v, spec=".3f", signed=False) -> str:
    if v is None or is_nan(v):
        return "–"
    return format(v, ("+" if signed else "") + spec)


def _images(r: RowCheck) -> str:
    if not r.paired:
        return "–"
    return f"↑{r.images_up} ↓{r.images_down} of {r.n_images}"


_MD_HEADER = ["verdict", "backbone", "steps", "method", "task", "committed", "fresh", "Δ ± SE(Δ)", "allowed drop", "images ↑/↓"]


def _md_row(r: RowCheck) -> str:
    verdict = {"regressed": "❌ regressed", "improved": "⬆️ improved", "missing": "⚠️ missing"}.get(r.verdict, "unchanged")
    if r.verdict == "unchanged" and r.changed:
        verdict = "unchanged (moved within tolerance)"
    se = "" if r.delta_stderr is None else f" ± {r.delta_stderr:.4f}" + ("" if r.paired else " (unpaired)")
    cells = [verdict, r.backbone, str(r.steps), r.method, r.task, _f(r.committed), _f(r.fresh),
             ("–" if r.delta is None else f"{r.delta:+.4f}") + se, _f(r.allowed_drop, ".4f"), _images(r)]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


CHECK_LEGEND = "SE(Δ): standard error of the paired per-image differences, clustered by prompt."


def _md_table(rows: list[RowCheck]) -> list[str]:
    return ["| " + " | ".join(_MD_HEADER) + " |", "|" + "|".join("---" for _ in _MD_HEADER) + "|", *(_md_row(r) for r in rows), "", CHECK_LEGEND]


def render_markdown(report: CheckReport) -> str:
    """For a CI job summary: the headline, what failed or moved, then the full table collapsed."""
    out = [f"### {report.headline}", "", f"`{report.command}` · metric `{report.metric}` · tolerance {report.tolerance:g} × SE(Δ)"
           + (" · --strict: missing rows fail" if report.strict else ""), ""]
    sections = [
        ("Regressions", [r for r in report.rows if r.verdict == "regressed"]),
        ("Missing committed rows" + (" (fail under --strict)" if report.strict else ""), [r for r in report.rows if r.verdict == "missing"]),
        ("Improvements", [r for r in report.rows if r.verdict == "improved"]),
        ("Moved within tolerance", report.moved_within),
    ]
    for title, rows in sections:
        if rows:
            out += [f"#### {title} ({len(rows)})", "", *_md_table(rows), ""]
    unpaired = [r for r in report.rows if r.verdict != "missing" and not r.paired]
    if unpaired:
        out += [f"{len(unpaired)} rows have no committed per-image scores: their SE(Δ) is unpaired, √(se_committed² + se_fresh²). "
                "Regenerate the leaderboard (`jsbench compare`) to store them.", ""]
    if report.new_rows:
        out += ["Fresh rows with no committed counterpart (not checked): " + ", ".join(report.new_rows) + ".", ""]
    if report.not_checked:
        out += ["Committed rows outside this run (other backbones or budgets, not checked): "
                + ", ".join(f"{k} ({v} row{'' if v == 1 else 's'})" for k, v in report.not_checked.items()) + ".", ""]
    out += [report.tolerance_text, "", f"<details><summary>All {len(report.rows)} rows and tasks</summary>", "", *_md_table(report.rows), "", "</details>", ""]
    return "\n".join(out)


def report_dict(report: CheckReport) -> dict:
    return {
        "schema": REPORT_SCHEMA,
        "headline": report.headline,
        "exit_code": report.exit_code,
        "command": report.command,
        "suite": report.suite,
        "metric": report.metric,
        "backbone": report.backbone,
        "model_id": report.model_id,
        "steps": report.steps,
        "prompts_seeds": report.prompts_seeds,
        "strict": report.strict,
        "tolerance": {
            "multiplier": report.tolerance,
            "unit": "standard errors of the paired difference (SE(Δ))",
            "allowed_drop_unit": report.metric,
            "rule": report.tolerance_text,
        },
        "counts": {v: report.count(v) for v in VERDICTS} | {"moved_within_tolerance": len(report.moved_within), "rows": len(report.rows)},
        "rows": [_clean(asdict(r)) for r in report.rows],
        "new_rows": report.new_rows,
        "not_checked": report.not_checked,
    }


def _clean(d: dict) -> dict:
    return {k: (None if is_nan(v) else v) for k, v in d.items()}


def render_json(report: CheckReport) -> str:
    return json.dumps(report_dict(report), indent=1, ensure_ascii=False) + "\n"


def render_junit(report: CheckReport) -> str:
    """One test suite per (backbone, model, budget), one test case per committed row and task."""
    root = ET.Element("testsuites", name=f"jsbench compare --check · {report.suite}", tests=str(len(report.rows)),
                      failures=str(len(report.failed)), errors="0")
    groups: dict[tuple, list[RowCheck]] = {}
    for r in report.rows:
        groups.setdefault((r.backbone, r.model_id, r.steps), []).append(r)
    for (backbone, model_id, steps), rows in groups.items():
        failed = [r for r in rows if r in report.failed]
        skipped = [r for r in rows if r.verdict == "missing" and r not in failed]
        suite_el = ET.SubElement(root, "testsuite", name=f"{report.suite} · {backbone} · {model_id} · {steps} steps",
                                 tests=str(len(rows)), failures=str(len(failed)), errors="0", skipped=str(len(skipped)))
        for r in rows:
            case = ET.SubElement(suite_el, "testcase", name=r.name, classname=f"jsbench.{report.suite}.{backbone}.n{steps}", time="0")
            detail = _case_text(r)
            if r.verdict == "regressed":
                ET.SubElement(case, "failure", message=f"regressed: Δ {r.delta:+.4f} below the allowed drop {r.allowed_drop:.4f}", type="regressed").text = detail
            elif r.verdict == "missing":
                tag = "failure" if r in failed else "skipped"
                ET.SubElement(case, tag, message=f"missing: {r.note}", **({"type": "missing"} if tag == "failure" else {})).text = detail
            ET.SubElement(case, "system-out").text = detail
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _case_text(r: RowCheck) -> str:
    parts = [f"verdict: {r.verdict}" + (" (moved within tolerance)" if r.verdict == "unchanged" and r.changed else ""),
             f"committed {_f(r.committed, '.4f')}, fresh {_f(r.fresh, '.4f')}, Δ {_f(r.delta, '.4f', True)} ± {_f(r.delta_stderr, '.4f')}"
             + (" (paired)" if r.paired else " (unpaired)" if r.delta is not None else ""),
             f"allowed drop {_f(r.allowed_drop, '.4f')} {r.metric}"]
    if r.paired:
        parts.append(f"images ↑{r.images_up} ↓{r.images_down} of {r.n_images}")
    if r.note:
        parts.append(r.note)
    return "; ".join(parts)


RENDERERS = {"markdown": render_markdown, "json": render_json, "junit": render_junit}


def write_report(report: CheckReport, path: str | Path) -> Path:
    write_text_atomic(path, RENDERERS[report_format(path)](report))
    return Path(path)

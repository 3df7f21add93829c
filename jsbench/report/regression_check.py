"""The CI regression check: every committed leaderboard row and task against a fresh run, with the
standard error of the *paired* difference (the reports a CI system can show, Markdown, JSON and JUnit,
are jsbench/report/regression_reports.py).

Both runs use the same prompts and seeds, so the difference is taken image by image. For that the
leaderboard keeps, beside `<suite>.csv`, the per-image scores of every row in `<suite>.scores.jsonl`
(one JSON line per row: prompts, seeds and the primary metric's score of each image, prompt-major).
The paired difference is aggregated by the suite's own rule (`suite.aggregate`), exactly as the
leaderboard's "Δ vs default" is, so its standard error is that of the per-image differences. A
committed leaderboard written before that file existed is still checked, with the unpaired standard
error √(se_committed² + se_fresh²), and the report says so row by row.

Verdicts, per (row, task): `regressed` when Δ < −tolerance·SE(Δ), `improved` when Δ > +tolerance·SE(Δ),
`unchanged` otherwise, `missing` when the fresh run has no such row. Every change is still reported:
`changed` counts the images whose score moved (so on a deterministic world a row that moved within the
tolerance is visible), and only regressions fail the check (missing rows too, under `strict`).

Exit codes of `jsbench compare --check`: 0 nothing regressed, 1 regressed (or missing under --strict),
2 refused (bad input: no committed leaderboard, a report path with an unknown suffix, committed
per-image scores on other prompts or seeds, a scores file that does not reproduce its CSV).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from jsbench import JsbenchError
from jsbench.report.compare_request import CompareRequest
from jsbench.io import write_text_atomic
from jsbench.report.leaderboard import method_rank, provenance_key
from jsbench.evaluation.evaluate import NOISE_SCHEME
from jsbench.evaluation.results import PROVENANCE_FIELDS

VERDICTS = ("regressed", "missing", "improved", "unchanged")  # the order reports list them in
SCORES_SCHEMA = "jsbench.scores/1"
CSV_DIGITS = 6  # leaderboard.render_csv writes values with 6 decimals


class CheckError(JsbenchError):
    pass


def scores_path(leaderboard_dir: Path, suite: str) -> Path:
    return Path(leaderboard_dir) / f"{suite}.scores.jsonl"


# --- the committed per-image scores -------------------------------------------------------------------


def row_key(backbone: str, model_id: str, steps, method: str) -> tuple[str, str, int, str]:
    return (backbone, model_id, int(steps), method)


def line_provenance(line: dict) -> dict:
    """The provenance of a committed CSV line or scores entry (older files have none)."""
    prov = line.get("provenance", line)
    return {f: str(prov[f]) for f in PROVENANCE_FIELDS if prov.get(f)}


def scores_entry(key: tuple, suite_name: str, metric: str, run, values: dict[str, float], provenance: dict | None = None) -> dict:
    """One line of `<suite>.scores.jsonl`: a row's per-image scores of `metric`, prompt-major, the
    per-task values they aggregate to (so a stale line is recognised when the leaderboard is rewritten)
    and the section's provenance (detector, prompt set, ...: a row is one per provenance)."""
    backbone, model_id, steps, method = key
    return {
        "schema": SCORES_SCHEMA, "backbone": backbone, "model_id": model_id, "steps": steps, "method": method,
        "provenance": line_provenance(provenance or {}),
        "suite": suite_name, "metric": metric, "seeds": list(run.seeds), "prompts": [it.prompt for it in run.items],
        "tasks": [it.task for it in run.items], "scores": [s.get(metric) for s in run.scores], "values": values,
        "noise": NOISE_SCHEME,  # image k of prompt p from noise_seed(p, seeds[k]); absent: shared seeds (older files)
        "train_seeds": getattr(run, "train_seeds", 1),  # scores of a learned row: the per-image mean over its training seeds
    }


def read_scores(path: Path, strict: bool = True) -> dict[tuple, dict]:
    """Committed per-image scores by (row key, provenance key); an absent file is an empty mapping. A
    malformed line is refused (strict: the check) or skipped (rewriting the leaderboard)."""
    path = Path(path)
    if not path.exists():
        return {}
    out = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        try:
            e = json.loads(line)
            key = row_key(e["backbone"], e["model_id"], e["steps"], e["method"])
            n = len(e["prompts"]) * len(e["seeds"])
            if len(e["scores"]) != n or len(e["tasks"]) != len(e["prompts"]) or not isinstance(e["values"], dict):
                raise ValueError(f"{len(e['scores'])} scores for {len(e['prompts'])} prompts × {len(e['seeds'])} seeds")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if strict:
                raise CheckError(f"{path}:{lineno}: not a per-image scores line ({exc}); regenerate it with `jsbench compare`") from None
            continue
        out[(key, provenance_key(line_provenance(e)))] = e
    return out


def write_scores(path: Path, tables, runs: dict[tuple, object], suite_name: str, metric: str, provenance: dict | None = None) -> Path:
    """Per-image scores of every leaderboard row: this run's (`runs`, of this `provenance`), else the
    file's own line when it still aggregates to the row's values (a row from another backbone's run); a
    row with neither has none, and its check falls back to the unpaired standard error."""
    existing = read_scores(path, strict=False)
    mine = provenance_key(line_provenance(provenance or {}))
    lines, seen = [], set()
    for t in tables:
        prov = provenance_key(line_provenance(getattr(t, "provenance", None) or {}))
        for row in t.rows:
            key = row_key(t.backbone, t.model_id, row["steps"], row["method"])
            if (key, prov) in seen:
                continue  # the ceiling row sits in every budget's table
            seen.add((key, prov))
            values = {task: row[task] for task in [*t.tasks, "overall"] if row.get(task) is not None}
            if key in runs and prov == mine:
                lines.append(scores_entry(key, suite_name, metric, runs[key], values, provenance))
            elif (key, prov) in existing and _same_values(existing[(key, prov)]["values"], values, 0.6 * 10**-CSV_DIGITS):
                lines.append(existing[(key, prov)])  # a kept section's values come back from the CSV, rounded
    write_text_atomic(path, "".join(json.dumps(e, sort_keys=True) + "\n" for e in lines))
    return Path(path)


def _same_values(a: dict, b: dict, tol: float) -> bool:
    return set(a) == set(b) and all(_close(a[k], b[k], tol) for k in a)


def _close(a, b, tol) -> bool:
    if a is None or b is None or is_nan(a) or is_nan(b):
        return (a is None or is_nan(a)) and (b is None or is_nan(b))
    return abs(a - b) <= tol


def is_nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


# --- the check ---------------------------------------------------------------------------------------


@dataclass
class RowCheck:
    backbone: str
    model_id: str
    steps: int
    method: str
    task: str
    metric: str
    verdict: str
    committed: float | None = None
    fresh: float | None = None
    delta: float | None = None
    delta_stderr: float | None = None
    allowed_drop: float | None = None  # tolerance × delta_stderr, in the metric's units
    paired: bool = False  # delta_stderr from per-image differences (else unpaired, see `note`)
    n_images: int | None = None
    images_up: int | None = None  # images whose score rose / fell (paired rows only)
    images_down: int | None = None
    changed: bool = False  # anything moved at all (an image, or the value beyond CSV rounding)
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.method} · {self.task}"


@dataclass
class CheckReport:
    suite: str
    metric: str
    backbone: str
    model_id: str
    steps: list[int]
    tolerance: float
    strict: bool
    command: str
    rows: list[RowCheck]
    new_rows: list[str] = field(default_factory=list)  # fresh rows with no committed counterpart
    not_checked: dict[str, int] = field(default_factory=dict)  # committed rows of other backbones/budgets
    prompts_seeds: str = ""

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.rows)

    @property
    def failed(self) -> list[RowCheck]:
        return [r for r in self.rows if r.verdict == "regressed" or (self.strict and r.verdict == "missing")]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    @property
    def moved_within(self) -> list[RowCheck]:
        return [r for r in self.rows if r.verdict == "unchanged" and r.changed]

    @property
    def headline(self) -> str:
        n = len(self.rows)
        counts = ", ".join(f"{self.count(v)} {v}" for v in VERDICTS)
        where = f"{self.suite} · {self.backbone} · {'/'.join(map(str, self.steps))} steps"
        if self.count("regressed"):
            head = f"❌ jsbench check failed: {self.count('regressed')} of {n} rows regressed"
        elif self.failed:
            head = f"❌ jsbench check failed: {self.count('missing')} of {n} committed rows missing (--strict)"
        else:
            head = f"✅ jsbench check passed: nothing regressed in {n} rows"
        moved = f", {len(self.moved_within)} moved within tolerance" if self.moved_within else ""
        return f"{head} ({where}: {counts}{moved})"

    @property
    def tolerance_text(self) -> str:
        return (
            f"A row regresses when Δ = fresh − committed < −{self.tolerance:g} × SE(Δ), and improves when "
            f"Δ > +{self.tolerance:g} × SE(Δ); the allowed drop is given per row in units of `{self.metric}`. "
            "SE(Δ) is the standard error of the paired difference, from the per-image differences on the same "
            f"prompts and seeds ({self.prompts_seeds}). Any change is reported (images ↑/↓ counts every image whose "
            "score moved); only drops beyond the tolerance fail."
        )


def _task_metrics(suite, scores: list[dict], items: list, metric: str) -> dict:
    return {m.task: m for m in suite.aggregate(scores, items) if m.metric == metric}


def _csv_float(v) -> float | None:
    if v is None or v == "":
        return None
    x = float(v)
    return None if math.isnan(x) else x


def reproduces_csv_value(full: float | None, written: float | None) -> bool:
    """Whether `written`, a CSV value (CSV_DIGITS decimals), is `full` as the CSV writes it. Compared
    unrounded, within half a last digit and a hair of float error: `full` recomputed from the per-image
    scores in another order can sit on the other side of a rounding boundary (0.7578125000000016 against a
    written 0.757812, from 0.75781249999...), which rounding `full` first would call a mismatch."""
    return _close(full, written, 0.6 * 10**-CSV_DIGITS)


def _rounded(v: float | None) -> float | None:
    return None if v is None or is_nan(v) else float(f"{v:.{CSV_DIGITS}f}")


def check_tolerance(tolerance: float) -> None:
    """--check's tolerance must be a number ≥ 0 (refused before anything is evaluated, and by the check)."""
    if not tolerance >= 0:
        raise CheckError(f"--tolerance must be a number ≥ 0 (standard errors of the paired difference), got {tolerance}")


def _committed_key(line: dict) -> tuple[tuple, int]:
    """A committed CSV line's row key and its section's budget (`budget`; a CSV without it: the row's steps)."""
    try:
        key = row_key(line["backbone"], line["model_id"], line["steps"], line["method"])
        line["task"]
        return key, (int(line["budget"]) if line.get("budget") else key[2])
    except (KeyError, ValueError, TypeError):
        raise CheckError(f"committed leaderboard line {line} lacks backbone, model_id, steps, method or task") from None


def _budget_in_scope(line: dict, key: tuple, budget: int, steps_list: list[int]) -> bool:
    # a CSV without budgets: the ceiling row goes with any budget
    return budget in steps_list or (not line.get("budget") and key[3].startswith("ceiling"))


def check_scope(committed: list[dict], backbone_name: str, steps_list: list[int], where: str = "the committed leaderboard") -> None:
    """Refuse a check that would compare nothing: no committed row of this backbone at these budgets. It needs
    only the backbone's name, so `compare --check` runs it before any weights load; the check itself refuses
    again once the model is known (`check_against_committed`: backbone, model and budgets)."""
    held: dict[str, set[int]] = {}
    for line in committed:
        key, budget = _committed_key(line)
        if key[0] == backbone_name and _budget_in_scope(line, key, budget, steps_list):
            return
        if not key[3].startswith("ceiling") or line.get("budget"):
            held.setdefault(key[0], set()).add(budget)
    holds = "; ".join(f"{name} at {', '.join(map(str, sorted(b)))} steps" for name, b in sorted(held.items())) or "no rows"
    raise CheckError(f"--check would compare nothing: no row of {where} is of backbone {backbone_name!r} at "
                     f"{', '.join(f'--steps {n}' for n in steps_list)} (it holds {holds})")


def check_against_committed(
    committed: list[dict],
    committed_scores: dict[tuple, dict],
    runs: dict[tuple, object],
    suite,
    backbone_name: str,
    model_id: str,
    steps_list: list[int],
    tolerance: float = CompareRequest.tolerance,  # compare --check's default, declared there
    strict: bool = False,
    command: str = "jsbench compare --check",
    scores_file: str = "scores",
    provenance: dict | None = None,
) -> CheckReport:
    """Every committed row in scope and each of its tasks against the fresh run of the same key. In scope:
    the sections of this backbone, model and these budgets whose provenance (detector, prompt set, ...)
    is this run's; a budget whose committed sections all have another provenance is reported missing
    (this run cannot produce those numbers). `runs` maps row keys to the fresh `EvalRun`s."""
    check_tolerance(tolerance)
    metric = suite.primary_metric
    fresh_prov = line_provenance(provenance or {})
    # a committed section from before the suite recorded a field was made as the suite says (the ocr suite's:
    # protocol words), so a run under another protocol is never paired with it
    unrecorded = {f: str(v) for f, v in suite.unrecorded_provenance.items()}
    sections: dict[int, dict[tuple, list]] = {}  # budget -> provenance key -> committed lines of that section
    not_checked: dict[str, int] = {}
    for line in committed:
        key, budget = _committed_key(line)
        if key[0] == backbone_name and key[1] == model_id and _budget_in_scope(line, key, budget, steps_list):
            sections.setdefault(budget, {}).setdefault(provenance_key(line_provenance(line)), []).append(line)
        else:
            where = f"{key[0]} · {budget} steps" + ("" if key[1] == model_id or key[0] != backbone_name else f" · {key[1]}")
            not_checked[where] = not_checked.get(where, 0) + (line["task"] == "overall")
    in_scope: dict[tuple, dict] = {}  # (row key, task) -> committed CSV line, first of duplicates
    other_provenance: dict[tuple, str] = {}  # (row key, task) -> why this run cannot produce it
    for budget, by_prov in sections.items():
        def differs(lines):  # the provenance fields where the section is not this run's
            prov = {**unrecorded, **line_provenance(lines[0])}
            return [f"{f} {prov[f]} (this run: {fresh_prov.get(f) or 'none'})" for f in prov if prov[f] != fresh_prov.get(f)]

        mine = [p for p, lines in by_prov.items() if not differs(lines)]
        # the most specific section of this run's provenance (an older one without provenance fits any)
        chosen = max(mine, key=lambda p: sum(bool(v) for v in p)) if mine else None
        for p, lines in by_prov.items():
            if p == chosen:
                for line in lines:
                    in_scope.setdefault((row_key(line["backbone"], line["model_id"], line["steps"], line["method"]), line["task"]), line)
            elif chosen is not None:
                where = f"{backbone_name} · {budget} steps · " + ", ".join(f"{f} {v}" for f, v in line_provenance(lines[0]).items() if v)
                not_checked[where] = not_checked.get(where, 0) + sum(line["task"] == "overall" for line in lines)
        if chosen is None:  # no committed section of this budget has this run's provenance
            lines = next(iter(by_prov.values()))
            why = "committed with " + "; ".join(differs(lines)) + ": regenerate the leaderboard"
            for line in lines:
                k = (row_key(line["backbone"], line["model_id"], line["steps"], line["method"]), line["task"])
                in_scope.setdefault(k, line)
                other_provenance.setdefault(k, why)
    if not in_scope:
        raise CheckError("--check compared nothing: no committed row matches this backbone and these step budgets")

    fresh_metrics = {key: _task_metrics(suite, run.scores, [it for it, _ in run.rows()], metric) for key, run in runs.items()}
    diffs: dict[tuple, tuple[dict, dict, list]] = {}  # key -> (diff metrics, committed metrics, per-image diffs)
    for key, task in in_scope:
        entry = committed_scores.get((key, provenance_key(line_provenance(in_scope[(key, task)]))))
        if key in diffs or key not in runs or entry is None or (key, task) in other_provenance:
            continue
        run = runs[key]
        if entry["prompts"] != [it.prompt for it in run.items] or entry["seeds"] != list(run.seeds):
            raise CheckError(
                f"committed per-image scores of {key[0]} · {key[2]} steps · {key[3]} are on {len(entry['prompts'])} prompts × "
                f"{len(entry['seeds'])} seeds, this run on {len(run.items)} × {len(run.seeds)} (or other prompts): "
                f"check with the committed settings (--seeds {len(entry['seeds'])}) or regenerate the leaderboard"
            )
        if entry.get("noise") != NOISE_SCHEME:
            raise CheckError(
                f"committed per-image scores of {key[0]} · {key[2]} steps · {key[3]} were drawn with "
                f"{'seeds shared by every prompt' if entry.get('noise') is None else repr(entry.get('noise'))}, this run with noise per "
                "(prompt, image): regenerate the leaderboard with `jsbench compare`"
            )
        if entry.get("metric", metric) != metric:
            raise CheckError(f"{scores_file}: row {key[3]} holds {entry.get('metric')!r} scores, the leaderboard ranks by {metric!r}")
        rows = [(it, s) for it in run.items for s in run.seeds]
        c_scores = [{} if v is None else {metric: v} for v in entry["scores"]]
        per_image = [
            (it.task, f[metric] - c[metric]) if metric in f and metric in c else (it.task, None)
            for (it, _), f, c in zip(rows, run.scores, c_scores)
        ]
        d_scores = [{} if d is None else {metric: d} for _, d in per_image]
        items = [it for it, _ in rows]
        diffs[key] = (_task_metrics(suite, d_scores, items, metric), _task_metrics(suite, c_scores, items, metric), per_image)

    checks: list[RowCheck] = []
    seen_keys = set()
    for (key, task), line in in_scope.items():
        seen_keys.add(key)
        committed_value = _csv_float(line.get("value"))
        base = dict(backbone=key[0], model_id=key[1], steps=key[2], method=key[3], task=task, metric=metric)
        fresh_m = fresh_metrics.get(key, {}).get(task)
        if fresh_m is None or (key, task) in other_provenance:
            why = other_provenance.get((key, task)) or ("the fresh run has no such row" if key not in runs else f"the fresh run has no {task!r} task")
            checks.append(RowCheck(**base, verdict="missing", committed=committed_value, note=why))
            continue
        fresh_value = None if is_nan(fresh_m.value) else fresh_m.value
        if key in diffs:
            d_metrics, c_metrics, per_image = diffs[key]
            c_m, d_m = c_metrics.get(task), d_metrics.get(task)
            c_full = None if c_m is None or is_nan(c_m.value) else c_m.value
            if not reproduces_csv_value(c_full, committed_value):
                raise CheckError(
                    f"{scores_file} does not reproduce the committed {key[3]} · {task} at {key[2]} steps "
                    f"({c_full} vs {committed_value} in the CSV): regenerate the leaderboard with `jsbench compare`"
                )
            mine = [d for t, d in per_image if d is not None and (task == "overall" or t == task)]
            up, down = sum(d > 0 for d in mine), sum(d < 0 for d in mine)
            delta = None if d_m is None or is_nan(d_m.value) else d_m.value
            se = None if d_m is None or is_nan(d_m.stderr) else d_m.stderr
            rc = RowCheck(**base, verdict="", committed=c_full, fresh=fresh_value, delta=delta, delta_stderr=se, paired=True,
                          n_images=len(mine), images_up=up, images_down=down, changed=bool(up or down))
        else:
            # no committed per-image scores: the CSV's rounded value, the unpaired standard error
            n_committed = _csv_float(line.get("n_images"))
            if task == "overall" and n_committed is not None and int(n_committed) != fresh_m.n_images:
                raise CheckError(
                    f"committed {key[3]} at {key[2]} steps was scored on {int(n_committed)} images, this run on {fresh_m.n_images}: "
                    "check with the committed --seeds, or regenerate the leaderboard"
                )
            fresh_r = _rounded(fresh_value)
            delta = None if fresh_r is None or committed_value is None else fresh_r - committed_value
            se_f = None if is_nan(fresh_m.stderr) else fresh_m.stderr
            se_c = _csv_float(line.get("stderr"))
            note = f"unpaired SE: no committed per-image scores in {scores_file}"
            if se_c is None:
                se_c, note = se_f, note + "; the committed task SE is not stored, taken equal to the fresh one"
            se = None if se_f is None else math.sqrt(se_f**2 + se_c**2)
            rc = RowCheck(**base, verdict="", committed=committed_value, fresh=fresh_value, delta=delta, delta_stderr=se,
                          n_images=fresh_m.n_images, changed=bool(delta), note=note)
        if rc.delta is None:
            rc.verdict, rc.note = "missing", (rc.note + "; " if rc.note else "") + "no value on one side"
        else:
            rc.allowed_drop = tolerance * (rc.delta_stderr or 0.0)
            rc.verdict = "regressed" if rc.delta < -rc.allowed_drop else "improved" if rc.delta > rc.allowed_drop else "unchanged"
            if rc.verdict != "unchanged":
                rc.changed = True
        checks.append(rc)

    any_run = next(iter(runs.values()), None)
    new_rows = [f"{k[3]} ({k[2]} steps)" for k in runs if k[0] == backbone_name and k not in seen_keys]
    report = CheckReport(
        suite=suite.name, metric=metric, backbone=backbone_name, model_id=model_id, steps=sorted(steps_list), tolerance=tolerance,
        strict=strict, command=command, rows=_ordered(checks), new_rows=new_rows, not_checked=not_checked,
        prompts_seeds=f"{len(any_run.items)} prompts × {len(any_run.seeds)} seeds" if any_run is not None else "",
    )
    return report


def _ordered(rows: list[RowCheck]) -> list[RowCheck]:
    """By budget, method (leaderboard order) and the suite's task order, 'overall' first."""
    task_order = {}
    for r in rows:
        task_order.setdefault(r.task, len(task_order))
    return sorted(rows, key=lambda r: (r.backbone, r.model_id, r.steps, method_rank(r.method), r.task != "overall", task_order[r.task]))


__all__ = [
    "CheckError", "CheckReport", "RowCheck", "check_against_committed", "check_scope", "check_tolerance", "read_scores", "write_scores",
    "scores_path", "row_key", "scores_entry", "reproduces_csv_value", "VERDICTS",
]

"""Result records: one JSON line per (backbone, model, steps, schedule, suite, task, metric).

Records are appended, never rewritten, with one O_APPEND write per evaluation, so concurrent
writers and kills never leave a partial line behind a complete one. Readers take the newest record
for each key.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from jsbench import JsbenchError, __version__
from jsbench.evaluation.evaluate import NOISE_SCHEME, EvalRun, ScheduleSource
from jsbench.io import append_lines
from jsbench.scoring.geneval_prompts import prompt_set_hash as entries_hash
from jsbench.stats import Estimate, paired_two_level_estimate, two_level_estimate
from jsbench.suites.base import TaskMetric

PROVENANCE_FIELDS = ("detector", "color_model", "prompt_set", "ocr_engine", "reward_model", "protocol", "guidance")
# a record is one (configuration, provenance, task, metric): numbers from another detector, colour model,
# prompt set, OCR engine, reward model or guidance scale are another record, never a replacement
KEY_FIELDS = ("backbone", "model_id", "steps", "budget", "method", "suite", "task", "metric", *PROVENANCE_FIELDS)


@dataclass
class Record:
    backbone: str
    model_id: str
    steps: int  # the steps the schedule ran
    budget: int | None  # the leaderboard section it is filed under (None: every section of its backbone, the ceiling)
    method: str
    schedule: str
    suite: str
    task: str
    metric: str
    value: float
    stderr: float
    n_images: int
    n_prompts: int
    seeds: list[int]
    policy_checksum: str | None
    jsbench_version: str
    git_commit: str | None
    created: float
    delta_vs_default: float | None = None
    delta_stderr: float | None = None
    # provenance (None: does not apply, or a record written before jsbench recorded it)
    detector: str | None = None  # GenEval object detector id, e.g. "mask2former:facebook/..." or "embedded-exact"
    color_model: str | None = None  # GenEval colour classifier id
    prompt_set: str | None = None  # sha256 of the evaluated prompts, one json.dumps(metadata) a line
    ocr_engine: str | None = None
    reward_model: str | None = None
    protocol: str | None = None  # HPDv2: "hpdv2-train" (the papers') or "benchmark-split" (the fallback)
    guidance: str | None = None  # the backbone's guidance scale, e.g. "3.5" (None: it takes none, or not recorded)
    # noise: image k of a prompt from `noise_seed(prompt, seed base + k)` under scheme `noise` (None: older
    # records, where every prompt shared seeds 0..n-1)
    seed_base: int | None = None
    noise: str | None = None
    train_seeds: int | None = None  # a learned row: the training seeds it is the mean of (None: not learned)
    converged: bool | None = None  # a learned row: its seed-averaged held-out curve has stopped moving (None: not judged)
    # a learned row whose training seeds drew one shared noise stream (runs trained before seeds were
    # independent; their manifests record --noise-stream shared): its seed term may be too small
    shared_noise: bool | None = None
    # degrees of freedom of `stderr` and `delta_stderr` (jsbench.stats: prompts - 1, Satterthwaite over tasks
    # and over the prompt and training-seed terms); None: not recorded (older records)
    df: float | None = None
    delta_df: float | None = None

    def key(self) -> tuple:
        return tuple(getattr(self, f) for f in KEY_FIELDS)

    def provenance(self) -> dict:
        return {f: getattr(self, f) for f in PROVENANCE_FIELDS}

    @property
    def row_steps(self) -> int:
        """The `steps` its leaderboard row shows: its section's budget, or, for a row in every section (the
        ceiling), the steps it ran."""
        return self.steps if self.budget is None else self.budget


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def prompt_set_hash(items) -> str:
    """sha256 of the distinct prompts evaluated, in order, one `json.dumps` of each item's metadata a line
    (its task and prompt when it has none): for GenEval's official prompts, the official file's sha256."""
    distinct = {}
    for it in items:
        distinct.setdefault(it.prompt, it)
    return entries_hash(it.entry() for it in distinct.values())


def suite_provenance(suite, items=None) -> dict:
    """The suite's provenance fields (`suite.provenance()`, {} where it declares none), with `prompt_set` the
    hash of the items evaluated when they are given."""
    out = dict.fromkeys(PROVENANCE_FIELDS)
    out.update({k: v for k, v in suite.provenance().items() if k in out})
    if items is not None:
        out["prompt_set"] = prompt_set_hash(items)
    return out


def _by_key(metrics) -> dict[tuple[str, str], object]:
    return {(m.task, m.metric): m for m in metrics}


def metric_estimate(m: TaskMetric) -> Estimate:
    """A suite's aggregate as a jsbench.stats Estimate (an unrecorded df: nan)."""
    return Estimate(m.value, m.stderr, m.n_images, m.n_prompts, df=math.nan if m.df is None else m.df)


def overall_of(suite, scores: list[dict], items: list) -> TaskMetric | None:
    """The suite's headline for these per-image scores (one item per score): its 'overall' of the primary
    metric; None when the suite gives none."""
    key = ("overall", suite.primary_metric)
    return next((m for m in suite.aggregate(scores, items) if (m.task, m.metric) == key), None)


def run_metrics(suite, run: EvalRun) -> dict[tuple[str, str], TaskMetric]:
    """(task, metric) -> the suite's aggregate of a run. A learned row of several training seeds: the value
    is the mean over seeds of each seed's aggregate and the stderr the two-level one (jsbench.stats:
    SE_prompt(per-image mean over seeds)^2 + var_seeds / S), df its Satterthwaite df."""
    items = [it for it, _ in run.rows()]
    pooled = _by_key(suite.aggregate(run.scores, items))
    if run.train_seeds == 1:
        return pooled
    per_seed = [_by_key(suite.aggregate(scores, items)) for scores in run.per_seed()]
    out = {}
    for key, m in pooled.items():
        est = two_level_estimate([ps[key].value for ps in per_seed if key in ps], metric_estimate(m))
        out[key] = replace(m, value=est.value, stderr=est.stderr, df=est.df)
    return out


def paired_estimates(suite, run: EvalRun, reference: EvalRun) -> dict[tuple[str, str], Estimate] | None:
    """(task, metric) -> the paired difference run - reference on the same images (an Estimate: value, SE,
    df, t interval), aggregated as the suite aggregates scores (prompt-clustered, jsbench.stats); None when
    the two runs are not on the same prompts and seeds (nothing to pair). Rows of several training seeds:
    the mean over seeds of each seed's paired difference (seed s against seed s when both have as many
    seeds, else against the other row's seed mean), with the two-level stderr and its Satterthwaite df."""
    rows = run.rows()
    if [(it.prompt, s) for it, s in reference.rows()] != [(it.prompt, s) for it, s in rows]:
        return None
    items = [it for it, _ in rows]
    diff_scores = [{k: a[k] - b[k] for k in a if k in b} for a, b in zip(run.scores, reference.scores)]
    pooled = _by_key(suite.aggregate(diff_scores, items))
    if run.train_seeds == 1 and reference.train_seeds == 1:
        return {key: metric_estimate(m) for key, m in pooled.items()}
    a_seeds = [_by_key(suite.aggregate(scores, items)) for scores in run.per_seed()]
    b_seeds = [_by_key(suite.aggregate(scores, items)) for scores in reference.per_seed()]
    out = {}
    for key, m in pooled.items():
        a = [ps[key].value for ps in a_seeds if key in ps]
        b = [ps[key].value for ps in b_seeds if key in ps]
        out[key] = paired_two_level_estimate(a, b, metric_estimate(m)) if a and b else metric_estimate(m)
    return out


def paired_metrics(suite, run: EvalRun, reference: EvalRun) -> dict[tuple[str, str], tuple[float, float]] | None:
    """`paired_estimates` as (mean, stderr) pairs."""
    paired = paired_estimates(suite, run, reference)
    return None if paired is None else {key: (e.value, e.stderr) for key, e in paired.items()}


def make_records(backbone, suite, source: ScheduleSource, run: EvalRun, reference: EvalRun | None = None) -> list[Record]:
    """Aggregate a run into records; with a reference run (the default schedule on the same prompts and
    seeds) each record also carries the paired difference to it and that difference's stderr. Every
    record carries the suite's provenance and the hash of the prompts it averages over."""
    rows = run.rows()
    items = [it for it, _ in rows]
    from jsbench.backbones import recorded_guidance

    provenance = {**suite_provenance(suite, run.items), "guidance": recorded_guidance(backbone)}
    metrics = list(run_metrics(suite, run).values())
    deltas = {}
    if reference is not None:
        deltas = paired_estimates(suite, run, reference)
        if deltas is None:
            raise JsbenchError("paired comparison needs the same prompts and seeds")
    commit, now = git_commit(), time.time()
    converged = row_converged(source)
    out = []
    for m in metrics:
        d = deltas.get((m.task, m.metric))
        out.append(
            Record(
                backbone=backbone.name,
                model_id=backbone.model_id,
                steps=source.steps,
                budget=source.budget,
                method=source.label,
                schedule=source.spec,
                suite=suite.name,
                task=m.task,
                metric=m.metric,
                value=m.value,
                stderr=m.stderr,
                n_images=m.n_images,
                n_prompts=m.n_prompts,
                seeds=run.seeds,
                policy_checksum=source.checksum,
                jsbench_version=__version__,
                git_commit=commit,
                created=now,
                delta_vs_default=None if d is None else d.value,
                delta_stderr=None if d is None else d.stderr,
                **provenance,
                seed_base=run.seeds[0] if run.seeds else None,
                noise=NOISE_SCHEME,
                train_seeds=run.train_seeds if source.spec.startswith("policy:") else None,
                converged=converged,
                shared_noise=seeds_share_noise(source),
                df=m.df,
                delta_df=None if d is None else d.df,
            )
        )
    return out


def row_converged(source: ScheduleSource) -> bool | None:
    """A learned row's verdict (jsbench.policy.convergence.row_verdict): its training seeds' held-out curves averaged
    point by point have stopped moving (rising or falling). None when it is no saved policy, or a seed has no heldout.jsonl."""
    kind, _, arg = source.spec.partition(":")
    if kind not in ("policy", "global") or not arg or not Path(arg).is_dir():
        return None
    from jsbench.policy.convergence import row_verdict

    return row_verdict(arg)["converged"]


def seeds_share_noise(source: ScheduleSource) -> bool | None:
    """Whether a learned row's training seeds drew one shared noise stream (a manifest's `noise_stream`
    "shared"); None for a row of one seed or no learned row."""
    manifests = getattr(source, "seed_manifests", None) or []
    if len(manifests) < 2:
        return None
    return any((m.get("train") or {}).get("noise_stream") == "shared" for m in manifests)


def append_records(path: str | Path, records: list[Record]) -> None:
    append_lines(Path(path), [json.dumps(_clean(asdict(r)), sort_keys=True) + "\n" for r in records])


def _clean(d: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


def read_records(path: str | Path) -> list[Record]:
    """All complete records, newest last; a line cut short by a crash is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    known = {f.name for f in fields(Record)}
    out = []
    for line in path.read_text().splitlines():
        try:
            data = json.loads(line)
            if isinstance(data, dict) and "budget" not in data:
                data["budget"] = _budget_of_old_line(data)
            # fields this version does not know are dropped; fields it added since default to None
            out.append(Record(**{k: (float("nan") if v is None and k in ("value", "stderr") else v) for k, v in data.items() if k in known}))
        except (json.JSONDecodeError, TypeError, AttributeError):
            continue
    return out


def _budget_of_old_line(data: dict) -> int | None:
    """The section of a record written before records carried their budget: the ceiling sat in every section
    of its backbone, every other row in that of its steps (a distilled row's steps were its section's)."""
    return None if str(data.get("method", "")).startswith("ceiling") else data.get("steps")


def latest(records: list[Record]) -> list[Record]:
    newest: dict[tuple, Record] = {}
    for r in records:
        if r.key() not in newest or r.created >= newest[r.key()].created:
            newest[r.key()] = r
    return list(newest.values())


__all__ = ["Record", "KEY_FIELDS", "PROVENANCE_FIELDS", "make_records", "paired_metrics", "paired_estimates", "metric_estimate", "overall_of", "run_metrics", "row_converged", "seeds_share_noise", "suite_provenance", "prompt_set_hash", "append_records", "read_records", "latest"]

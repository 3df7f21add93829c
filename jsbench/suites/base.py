"""What every suite offers and declares: items to generate, a per-image score, a per-task aggregate with stderr,
and what the rest of jsbench knows of it (`Suite`'s declared attributes, read from the class)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

from jsbench.stats import cluster_mean, weighted_overall


@dataclass(frozen=True)
class EvalItem:
    """One prompt of a suite: its text, its task (GenEval tag, OCR style, HPDv2 style) and metadata."""

    prompt: str
    task: str
    metadata: dict = field(default_factory=dict, compare=False, hash=False)

    def entry(self) -> dict:
        """The item as one line of a prompt file (`jsbench prompts --format jsonl`, the prompt-set hash): its
        metadata (GenEval's evaluation_metadata.jsonl entry), or its task and prompt when it has none."""
        return self.metadata if self.metadata else {"tag": self.task, "prompt": self.prompt}


@dataclass(frozen=True)
class TaskMetric:
    """An aggregated number: mean over images (or prompts) with its standard error, counts and the SE's
    degrees of freedom (jsbench.stats: prompts - 1 for one task, Satterthwaite over tasks; None: unknown)."""

    task: str
    metric: str
    value: float
    stderr: float
    n_images: int
    n_prompts: int
    df: float | None = None


#: how `aggregate_by_task` makes `overall` (the mean of the task means: GenEval's convention), as a page says it
TASK_MEAN_RULE = "overall = mean of the task means"


class Suite:
    """A suite: a prompt set, a per-image scorer and an aggregate. Every suite class subclasses this one and sets
    each attribute it declares without a default (`REQUIRED`) as a class attribute, so the rest of jsbench reads
    them from the class (`jsbench.suites.suite_class(name)`) without building the suite (no prompt file, no
    model) and no module keeps a table keyed by suite name; tests/test_suite_protocol.py checks every
    registered suite, plugins' included. An instance may refine a declaration (the ocr suite's metrics follow
    its `protocol=`); the class's value is what its default options give. The calls, `items`, `score` and
    `aggregate`, have no default (`CALLS`)."""

    name: str
    primary_metric: str
    """The metric leaderboards rank by; its 'overall' task is the suite's headline number."""
    protocol_seeds: int
    """Images per prompt of the suite's own published protocol: what `eval` and `compare` sample on a real model
    when --seeds is not given (the embedded worlds take jsbench.evaluation.protocol.EMBEDDED_SEEDS)."""
    overall_rule: str
    """How `aggregate` makes the 'overall' task, as the leaderboard page's metric line says it (TASK_MEAN_RULE
    when it is `aggregate_by_task`'s)."""
    leaderboard_metrics: tuple[str, ...] = ()
    """Further metrics shown beside the leaderboard (`<suite>.metrics.csv` and a page section; none: no such
    section)."""
    all_leaderboard_metrics: tuple[str, ...] = ()
    """Further metrics a kept section of another reading of the suite may hold (the ocr suite's two protocols),
    shown after `leaderboard_metrics`."""
    leaderboard_about: str = ""
    """What the further-metrics section says of its numbers ("": nothing)."""
    unrecorded_provenance: Mapping[str, str] = MappingProxyType({})
    """The provenance a committed section written before the suite recorded a field was made with (the ocr
    suite's protocol `words`), so a fresh section of another is never paired with it."""

    def provenance(self) -> dict[str, str]:
        """What scored the images, known without loading a model (detector, OCR engine, reward model, protocol:
        `jsbench.evaluation.results.PROVENANCE_FIELDS`), recorded with every result; read before any sampling, so it may
        refuse what is missing in one line. None of them: {}."""
        return {}

    def reading_memo(self):
        """(identity, memo) for a suite whose per-image score reads each image with an engine whose reading
        depends on the pixels alone (ocr: its OCR engine's `identity()` and `ReadingMemo`): `compare` keeps the
        readings beside the leaderboard and `compare --check` answers from them (jsbench.rewards.ocr_readings).
        None: nothing read is worth keeping (the default)."""
        return None

    @classmethod
    def preflight(cls, backbone=None) -> None:
        """Refuse, in one line and before any weights load or the suite is built, what the suite cannot score
        (`backbone`: the backbone's class, or the backbone; None checks only what needs no backbone). Nothing
        by default."""
        return None


#: what every suite class declares without a default in `Suite`: set on the class, or refused where it is loaded
REQUIRED = ("name", "primary_metric", "protocol_seeds", "overall_rule")
#: the calls every suite offers (no default):
#:   items(split="test") -> list[EvalItem];
#:   score(images [B, 3, H, W], items) -> per-image metrics, e.g. [{"correct": 1.0}] or [{"word_accuracy": .5, "ned": .2}];
#:   aggregate(scores, items) -> list[TaskMetric], per task and 'overall'
CALLS = ("items", "score", "aggregate")
#: every declared member, those with `Suite`'s defaults included
DECLARED = (*REQUIRED, "leaderboard_metrics", "all_leaderboard_metrics", "leaderboard_about", "unrecorded_provenance", "provenance",
            "preflight", "reading_memo", *CALLS)


def missing_calls(suite) -> list[str]:
    """The calls of `CALLS` that a suite (or its class) lacks. A class that only declares (the one a factory's
    annotation names, whose subclasses the factory returns: geneval's) lacks them all; a suite built lacks none."""
    return [c for c in CALLS if not callable(getattr(suite, c, None))]


def declaration_problems(cls) -> list[str]:
    """What suite class `cls` does not declare as `Suite` asks (a missing attribute, a value of the wrong kind),
    one phrase each; [] for a complete declaration. Read from the class: nothing is built. (The calls a built
    suite offers are `missing_calls`'.)"""
    if not isinstance(cls, type):
        return [f"{cls!r} is not a class"]
    if not issubclass(cls, Suite):
        return [f"{cls.__name__} does not subclass jsbench.suites.Suite"]
    missing = [a for a in REQUIRED if a not in dir(cls)]
    if missing:
        return [f"does not declare {', '.join(missing)}"]
    out = []
    for attr in ("name", "primary_metric", "overall_rule"):
        value = getattr(cls, attr)
        if not isinstance(value, str) or not value or "\n" in value:
            out.append(f"{attr} must be a one-line string, not {value!r}")
    seeds = cls.protocol_seeds
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        out.append(f"protocol_seeds must be a whole number of images per prompt >= 1, not {seeds!r}")
    for attr in ("leaderboard_metrics", "all_leaderboard_metrics"):
        value = getattr(cls, attr)
        if not isinstance(value, tuple) or not all(isinstance(m, str) and m for m in value):
            out.append(f"{attr} must be a tuple of metric names, not {value!r}")
    if not isinstance(cls.leaderboard_about, (str, property)):  # a property: the instance words it (its prompts)
        out.append(f"leaderboard_about must be a string, not {cls.leaderboard_about!r}")
    if not isinstance(cls.unrecorded_provenance, Mapping):
        out.append(f"unrecorded_provenance must be a mapping of provenance fields, not {cls.unrecorded_provenance!r}")
    if not callable(cls.provenance):
        out.append("provenance must be a method")
    if not isinstance(inspect.getattr_static(cls, "preflight"), (classmethod, staticmethod)):
        out.append("preflight must be a classmethod (it runs before the suite is built)")
    return out


def aggregate_by_task(scores: Sequence[dict[str, float]], items: Sequence[EvalItem], weights: dict[str, float] | None = None) -> list[TaskMetric]:
    """Per task and metric the mean over images with its prompt-clustered standard error (jsbench.stats);
    'overall' is the weighted mean of the task means (`weights` by task, default equal: GenEval's
    convention), its stderr sqrt(sum w_t^2 se_t^2) (tasks hold disjoint prompts) with the Satterthwaite df
    of those terms."""
    out: list[TaskMetric] = []
    tasks = list(dict.fromkeys(it.task for it in items))
    metrics = list(dict.fromkeys(k for s in scores for k in s))
    for metric in metrics:
        task_estimates, task_weights = [], []
        for task in tasks:
            pairs = [(s[metric], it.prompt) for s, it in zip(scores, items) if it.task == task and metric in s]
            if not pairs:
                continue
            est = cluster_mean([v for v, _ in pairs], [p for _, p in pairs])
            n_prompts = len({it.prompt for it in items if it.task == task})
            out.append(TaskMetric(task, metric, est.value, est.stderr, est.n, n_prompts, est.df))
            task_estimates.append(est)
            task_weights.append(1.0 if weights is None else float(weights.get(task, 0.0)))
        if task_estimates:
            overall = weighted_overall(task_estimates, task_weights)
            n_images = sum(1 for s in scores if metric in s)
            out.append(TaskMetric("overall", metric, overall.value, overall.stderr, n_images, len({it.prompt for it in items}), overall.df))
    return out

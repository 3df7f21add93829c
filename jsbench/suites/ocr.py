"""OCR text rendering: prompts with quoted text, scored by a real OCR engine with MARIO-Eval's rules.

Prompts are the text world's own seeded set (`make_text_prompts(seed=0, n=160)`, a fixed hashed split:
40 test, 120 train) or a UTF-8 file of prompts, one per line (`prompts_file=`; double quotes or MARIO's
single quotes). The task of an item is how many words it quotes (`one_word`, `two_words`, `many_words`).

Per image (see `jsbench.scoring.text.image_metrics`): MARIO-Eval's accuracy, precision and recall, plus
word_accuracy, ned and ocr_reward. Aggregates as MARIO-Eval pools them: `overall` is the mean over every
image (not the mean of task means), each task's mean beside it, and `f_measure` from the pooled precision
and recall (per task from that task's), its standard error by the delta method. Every standard error is
clustered by prompt (jsbench.stats.cluster_mean: a prompt's images share its difficulty), the pooled
`overall` and F's delta method too (the cluster-robust SE of each image's linearised F). The headline is
`word_accuracy`: every quoted word read. Neither the engine nor the prompt set is MARIO-Eval's
(MaskTextSpotterV3; six subsets), so absolute values are not the paper's: every record names the engine
and the prompts' sha256.

A backbone that cannot draw text (an embedded world without the text world: detail, scenes-dit) is
refused when the suite is built, before any sampling (`require_text_backbone`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from jsbench.rewards.ocr import default_engine, load_engine, require_text_backbone
from jsbench.scoring.text import f_measure, image_metrics, target_words
from jsbench.stats import cluster_mean
from jsbench.suites import register_suite
from jsbench.suites.base import EvalItem, TaskMetric, aggregate_by_task

SUITE_PROMPTS = 160
SUITE_SEED = 0
TASKS = ("one_word", "two_words", "many_words")


def task_of(prompt: str) -> str:
    n = len(target_words(prompt))
    return TASKS[min(n, 3) - 1]


class OcrSuite:
    name = "ocr"
    primary_metric = "word_accuracy"
    # beside the leaderboard (`jsbench.metric_tables`): MARIO-Eval's metrics under its names, pooled
    leaderboard_metrics = ("accuracy", "precision", "recall", "f_measure", "ned", "word_accuracy")

    def __init__(self, backbone=None, engine: str | None = None, prompts_file: str | None = None, **engine_options):
        from jsbench.world.text import load_text_prompts, make_text_prompts, parse_text_prompt

        if backbone is not None:
            require_text_backbone(backbone, "the ocr suite")
        self.engine_name = engine or default_engine()
        self._engine_options = engine_options
        self._engine = None
        self._prompts_file = prompts_file
        if prompts_file is not None:
            self._prompts = load_text_prompts(prompts_file)
        else:
            self._prompts = make_text_prompts(SUITE_SEED, SUITE_PROMPTS)
        self._meta = {}
        for p in self._prompts:
            spec = parse_text_prompt(p)
            self._meta[p] = {"targets": list(spec.words), "carrier": spec.carrier}

    @property
    def leaderboard_about(self) -> str:
        """What the further-metrics section says of its numbers: the prompts, and why they are not the paper's."""
        prompts = f"the prompts of {self._prompts_file}" if self._prompts_file else (
            f"the text world's held-out prompts (make_text_prompts seed {SUITE_SEED}, {SUITE_PROMPTS} prompts, every 4th for test)")
        return (f"MARIO-Eval's metrics (TextDiffuser's eval/ocr_eval.py): accuracy (sorted read words joined equal the "
                f"targets'), precision, recall and F from the precision and recall pooled over every image; `overall` "
                f"pools every image, each task's mean beside it. On {prompts}, read by the OCR engine each section names: "
                f"neither is MARIO-Eval's (MaskTextSpotterV3, six subsets), so the values are not the paper's.")

    def provenance(self) -> dict:
        """What read the images (recorded with every result, beside the sha256 of the prompts evaluated)."""
        return {"ocr_engine": self.engine_name}

    @property
    def engine(self):
        """The OCR engine, loaded on first use (listing items never needs it)."""
        if self._engine is None:
            self._engine = load_engine(self.engine_name, **self._engine_options)
        return self._engine

    def items(self, split: str = "test") -> list[EvalItem]:
        from jsbench.world.text import split_text_prompts

        return [EvalItem(p, task_of(p), self._meta[p]) for p in split_text_prompts(self._prompts, split)]

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        if images.shape[0] != len(items):
            raise ValueError(f"{images.shape[0]} images for {len(items)} items")
        texts = self.engine.read(images)
        return [image_metrics(text, it.prompt) for text, it in zip(texts, items)]

    def aggregate(self, scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
        per_task = [m for m in aggregate_by_task(scores, items) if m.task != "overall"]
        metrics = per_task + pooled_metrics(scores, items) + f_measure_metrics(scores, items)
        order = {t: i for i, t in enumerate(TASKS)}
        return sorted(metrics, key=lambda m: (m.metric, order.get(m.task, len(order))))


def pooled_metrics(scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
    """`overall` as MARIO-Eval pools it: each metric's mean over every image, whatever its task, with its
    standard error clustered by prompt (the images of a prompt are not independent draws)."""
    out = []
    n_prompts = len({it.prompt for it in items})
    for metric in dict.fromkeys(k for s in scores for k in s):
        pairs = [(s[metric], it.prompt) for s, it in zip(scores, items) if metric in s]
        est = cluster_mean([v for v, _ in pairs], [p for _, p in pairs])
        out.append(TaskMetric("overall", metric, est.value, est.stderr, est.n, n_prompts, est.df))
    return out


def _f_gradient(p: float, r: float) -> np.ndarray:
    if p + r <= 0:
        return np.zeros(2)
    return np.array([2.0 * r * r, 2.0 * p * p]) / (p + r) ** 2


def _f_of(group: Sequence[tuple[dict[str, float], str]]) -> tuple[float, float, int, float]:
    """F of the mean precision and recall of (scores, prompt) pairs, its delta-method SE clustered by prompt
    (the CR1 SE of grad . (p_i, r_i); with one image per prompt the i.i.d. grad' cov / n grad) and df."""
    rows = [((s["precision"], s["recall"]), prompt) for s, prompt in group if "precision" in s]
    if not rows:
        return float("nan"), float("nan"), 0, float("nan")
    pr = np.array([x for x, _ in rows], dtype=np.float64)
    p, r = pr.mean(0)
    n = len(pr)
    if n < 2:
        return float(f_measure(p, r)), float("nan"), n, float("nan")
    linear = (pr @ _f_gradient(p, r)).tolist()  # each image's first-order share of F
    est = cluster_mean(linear, [prompt for _, prompt in rows])
    return float(f_measure(p, r)), est.stderr, n, est.df


def f_measure_metrics(scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
    """MARIO's F-measure, 2PR / (P + R) of the averaged precision and recall: per task, and `overall` from
    the precision and recall pooled over every image, each with a delta-method standard error from the
    per-image precision and recall, clustered by prompt."""
    out: list[TaskMetric] = []
    groups = {task: [(s, it) for s, it in zip(scores, items) if it.task == task] for task in dict.fromkeys(it.task for it in items)}
    groups["overall"] = list(zip(scores, items))
    for task, rows in groups.items():
        value, se, n, df = _f_of([(s, it.prompt) for s, it in rows])
        if n:
            out.append(TaskMetric(task, "f_measure", value, se, n, len({it.prompt for _, it in rows}), df))
    return out


def preflight(backbone=None) -> None:
    """What `jsbench.suites.preflight` runs before any weights load: a backbone (or its class) that draws no
    text is refused in one line."""
    if backbone is not None:
        require_text_backbone(backbone, "the ocr suite")


@register_suite("ocr")
def _suite(backbone=None, **options) -> OcrSuite:
    return OcrSuite(backbone, **options)

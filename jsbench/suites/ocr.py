"""OCR text rendering: prompts with quoted text, scored by a real OCR engine with MARIO-Eval's rules.

Prompts are the text world's own seeded set (`make_text_prompts(seed=0, n=160)`, a fixed hashed split:
40 test, 120 train) or a UTF-8 file of prompts, one per line (`prompts_file=`). The task of an item is
how many words it quotes (`one_word`, `two_words`, `many_words`).

Per image (see `jsbench.scoring.text.image_metrics`): word_accuracy, exact_match, precision, recall,
ned and ocr_reward. Aggregates: per task and `overall` (the mean of the task means) for each, plus
`f1` computed from the averaged precision and recall (MARIO-Eval), its standard error by the delta
method. The headline is `word_accuracy`: every quoted word read.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from jsbench.rewards.ocr import default_engine, load_engine
from jsbench.scoring.text import f1_score, image_metrics, target_words
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

    def __init__(self, backbone=None, engine: str | None = None, prompts_file: str | None = None, **engine_options):
        from jsbench.world.text import load_text_prompts, make_text_prompts, parse_text_prompt

        self.engine_name = engine or default_engine()
        self._engine_options = engine_options
        self._engine = None
        if prompts_file is not None:
            self._prompts = load_text_prompts(prompts_file)
        else:
            self._prompts = make_text_prompts(SUITE_SEED, SUITE_PROMPTS)
        self._meta = {}
        for p in self._prompts:
            spec = parse_text_prompt(p)
            self._meta[p] = {"targets": list(spec.words), "carrier": spec.carrier}

    def provenance(self) -> dict:
        """What read the images (recorded with every result)."""
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
        metrics = aggregate_by_task(scores, items)
        metrics += f1_metrics(scores, items)
        order = {t: i for i, t in enumerate(TASKS)}
        return sorted(metrics, key=lambda m: (m.metric, order.get(m.task, len(order))))


def _f1_gradient(p: float, r: float) -> np.ndarray:
    if p + r <= 0:
        return np.zeros(2)
    return np.array([2.0 * r * r, 2.0 * p * p]) / (p + r) ** 2


def f1_metrics(scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
    """F1 from the averaged precision and recall, per task and overall (from the task means), with a
    delta-method standard error from the per-image covariance of precision and recall."""
    out: list[TaskMetric] = []
    tasks = list(dict.fromkeys(it.task for it in items))
    task_stats = []
    for task in tasks:
        pr = np.array([[s["precision"], s["recall"]] for s, it in zip(scores, items) if it.task == task and "precision" in s])
        if len(pr) == 0:
            continue
        p, r = pr.mean(0)
        n = len(pr)
        cov = np.cov(pr.T) / n if n > 1 else np.full((2, 2), np.nan)
        grad = _f1_gradient(p, r)
        se = math.sqrt(max(float(grad @ cov @ grad), 0.0)) if n > 1 else float("nan")
        n_prompts = len({it.prompt for it in items if it.task == task})
        out.append(TaskMetric(task, "f1", float(f1_score(p, r)), se, n, n_prompts))
        task_stats.append((p, r, cov, n))
    if task_stats:
        p = sum(s[0] for s in task_stats) / len(task_stats)
        r = sum(s[1] for s in task_stats) / len(task_stats)
        grad = _f1_gradient(p, r)
        var = sum(float(grad @ np.nan_to_num(s[2]) @ grad) for s in task_stats) / len(task_stats) ** 2
        n_images = sum(s[3] for s in task_stats)
        out.append(TaskMetric("overall", "f1", float(f1_score(p, r)), math.sqrt(max(var, 0.0)), n_images, len({it.prompt for it in items})))
    return out


@register_suite("ocr")
def _suite(backbone=None, **options) -> OcrSuite:
    return OcrSuite(backbone, **options)

"""GenEval: compositional prompts scored by object detection with GenEval's rules.

On the embedded world the prompts are the world's own six-task set (shapes for COCO classes) and the
detector is the world's exact detector on the rendered pixels. Per image: `correct` (0/1). Aggregate:
per-task means and `overall`, the mean of the six task means (GenEval's headline number).
"""

from __future__ import annotations

from typing import Sequence

import torch

from jsbench import JsbenchError
from jsbench.rewards import register_reward
from jsbench.rewards.geneval import TASKS, evaluate_detections
from jsbench.suites import register_suite
from jsbench.suites.base import EvalItem, TaskMetric, aggregate_by_task


class GenEvalSuite:
    name = "geneval"
    primary_metric = "correct"

    def __init__(self, backbone=None):
        if backbone is not None and backbone.name != "analytic":
            raise JsbenchError(
                f"the geneval suite runs on the analytic backbone in this release; {backbone.name!r} needs a real detector"
            )
        from jsbench.world.detect import detect
        from jsbench.world.scenes import make_prompts, split_prompts

        self._detect = detect
        self._prompts = make_prompts()
        self._split = split_prompts
        self._by_prompt = {p["prompt"]: p for p in self._prompts}

    def items(self, split: str = "test") -> list[EvalItem]:
        return [EvalItem(p["prompt"], p["tag"], p) for p in self._split(self._prompts, split)]

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        detections = self._detect(images)
        return [{"correct": float(evaluate_detections(d, it.metadata)[0])} for d, it in zip(detections, items)]

    def aggregate(self, scores, items) -> list[TaskMetric]:
        order = {t: i for i, t in enumerate(TASKS)}
        metrics = aggregate_by_task(scores, items)
        return sorted(metrics, key=lambda m: (m.metric, order.get(m.task, len(order))))

    def metadata(self, prompt: str) -> dict:
        meta = self._by_prompt.get(prompt)
        if meta is None:
            raise JsbenchError(f"prompt {prompt!r} is not part of the geneval suite")
        return meta


class GenEvalReward:
    """1.0 when the image passes GenEval's checks for its prompt, else 0.0."""

    name = "geneval"

    def __init__(self, backbone=None):
        self.suite = GenEvalSuite(backbone)

    def __call__(self, images: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        items = [EvalItem(p, "", self.suite.metadata(p)) for p in prompts]
        return torch.tensor([s["correct"] for s in self.suite.score(images, items)], dtype=torch.float32)


@register_suite("geneval")
def _suite(backbone=None, **options) -> GenEvalSuite:
    return GenEvalSuite(backbone)


@register_reward("geneval")
def _reward(backbone=None) -> GenEvalReward:
    return GenEvalReward(backbone)

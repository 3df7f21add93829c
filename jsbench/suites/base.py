"""What every suite offers: items to generate, a per-image score, a per-task aggregate with stderr."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch

from jsbench.splits import mean_stderr, overall_of_tasks


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
    """An aggregated number: mean over images (or prompts) with its standard error and counts."""

    task: str
    metric: str
    value: float
    stderr: float
    n_images: int
    n_prompts: int


class Suite(Protocol):
    name: str
    primary_metric: str
    """The metric leaderboards rank by; its 'overall' task is the suite's headline number."""

    def items(self, split: str = "test") -> list[EvalItem]: ...

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        """Per-image metrics, e.g. {"correct": 1.0} or {"word_accuracy": .5, "ned": .2}."""
        ...

    def aggregate(self, scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]: ...


def aggregate_by_task(scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
    """Per task and metric the mean over images; 'overall' is the mean of the task means (GenEval's
    convention), its stderr from the per-task stderrs (tasks are independent samples)."""
    out: list[TaskMetric] = []
    tasks = list(dict.fromkeys(it.task for it in items))
    metrics = list(dict.fromkeys(k for s in scores for k in s))
    for metric in metrics:
        task_means = []
        for task in tasks:
            vals = [s[metric] for s, it in zip(scores, items) if it.task == task and metric in s]
            if not vals:
                continue
            mean, se = mean_stderr(vals)
            n_prompts = len({it.prompt for it in items if it.task == task})
            out.append(TaskMetric(task, metric, mean, se, len(vals), n_prompts))
            task_means.append((mean, se))
        if task_means:
            value, se = overall_of_tasks(task_means)
            n_images = sum(1 for s in scores if metric in s)
            out.append(TaskMetric("overall", metric, value, se, n_images, len({it.prompt for it in items})))
    return out

"""What every suite offers: items to generate, a per-image score, a per-task aggregate with stderr."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch

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


class Suite(Protocol):
    name: str
    primary_metric: str
    """The metric leaderboards rank by; its 'overall' task is the suite's headline number."""

    def items(self, split: str = "test") -> list[EvalItem]: ...

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        """Per-image metrics, e.g. {"correct": 1.0} or {"word_accuracy": .5, "ned": .2}."""
        ...

    def aggregate(self, scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]: ...


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

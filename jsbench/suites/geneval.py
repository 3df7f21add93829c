"""GenEval: compositional prompts scored by object detection with GenEval's rules.

On the embedded world the prompts are the world's own six-task set (shapes for COCO classes), or a
GenEval metadata file over them (`metadata=PATH`, hand-edited rules allowed), and the detector is the
world's exact detector on the rendered pixels. Per image: `correct` (0/1). Aggregate:
per-task means and `overall`, the mean of the six task means (GenEval's headline number).

On a real backbone (`RealGenEvalSuite`) the prompts are GenEval's official 553
(`jsbench.scoring.geneval_prompts`, its generator at seed 43, byte for byte) or any
`evaluation_metadata.jsonl` (`metadata=PATH`); training prompts come from the same generator under other
seeds, minus every entry whose rules equal a test entry's. The detector (`jsbench.rewards.detectors`) is
`detector=` a spec or an object, else $JSBENCH_GENEVAL_DETECTOR, else Mask2Former (COCO instance, from
transformers); `owl`, `mmdet` (the official one, when mmdet is installed) and `geneval-official:FOLDER`
(GenEval's weights converted by `jsbench detectors convert-mmdet`; the default when $JSBENCH_GENEVAL_OFFICIAL
names the folder) are options. Each image is
detected against its own prompt's classes, so its verdict never depends on the other prompts of a batch.
Colours come from GenEval's CLIP rule on the detection's mask over grey #999 (`color_model="ARCH:TAG"`,
else $JSBENCH_GENEVAL_COLOR_MODEL, else ViT-L-14:openai, fp32 weights). Models load on first scoring,
local files only; `provenance()` names them (and the prompt set's sha256) without loading anything.
Aggregates add GenEval's summary lines: `correct_images` (share of images correct) and
`correct_prompts` (share of prompts with at least one correct image), both under task `overall`.
Both suites declare what `GenEval` declares (4 images per prompt on a real model, `overall` the mean of the
task means); the factory's annotation names it, so it is read without building either.

The scoring itself (metadata, detectors, verdicts) is `jsbench.rewards.geneval`'s scorers, shared with the
`geneval` reward; this module adds items, splits and aggregation.
"""

from __future__ import annotations

from typing import Sequence

import torch

from jsbench import JsbenchError
from jsbench.rewards.geneval import RealGenEvalScorer, WorldGenEvalScorer, draws_embedded_world
from jsbench.scoring.geneval import TASKS
from jsbench.stats import cluster_mean, naive_mean
from jsbench.suites import register_suite
from jsbench.suites.base import TASK_MEAN_RULE, EvalItem, Suite, TaskMetric, aggregate_by_task


class GenEval(Suite):
    """What both GenEval suites declare (the embedded world's and the real one's)."""

    name = "geneval"
    primary_metric = "correct"
    # GenEval's `generation/*.py` scripts sample `n_samples` 4 images per prompt (the 553 prompts give 2,212 images)
    protocol_seeds = 4
    overall_rule = TASK_MEAN_RULE  # GenEval's headline: the mean of the six task means


class GenEvalSuite(WorldGenEvalScorer, GenEval):
    _file_prompts: list[dict] | None = None  # set by `use_metadata`

    def use_metadata(self, path) -> "GenEvalSuite":
        """Evaluate on a GenEval metadata file (hand-edited rules included) instead of the world's test
        split. Its prompts must be ones the world draws, its classes and colours the world's: a
        detector that can never see a class would score 0 in silence, so such a line is refused."""
        from jsbench.scoring.geneval_prompts import load_metadata
        from jsbench.world import parse_prompt
        from jsbench.world.scenes import COLORS, SHAPES

        def check(entry: dict) -> str | None:
            try:
                (self._world().validate if self._world is not None else parse_prompt)(entry["prompt"])
            except JsbenchError:
                return f"the analytic world cannot draw {entry['prompt']!r} (its prompts: `jsbench prompts --suite geneval --split all`)"
            for field in ("include", "exclude"):
                for i, req in enumerate(entry.get(field, [])):
                    if req["class"] not in SHAPES:
                        return f"{field}[{i}].class {req['class']!r} is not a shape the analytic world draws ({', '.join(SHAPES)})"
                    if "color" in req and req["color"] not in COLORS:
                        return f"{field}[{i}].color {req['color']!r} is not a colour of the analytic world ({', '.join(COLORS)})"
            return None

        self._file_prompts = load_metadata(path, check=check)
        self._by_prompt = {**self._by_prompt, **{p["prompt"]: p for p in self._file_prompts}}
        return self

    def items(self, split: str = "test") -> list[EvalItem]:
        from jsbench.world.scenes import split_prompts

        # the scene world's split, for a backbone's own world's prompts (`detail`) too
        prompts = split_prompts(self._prompts, split)
        if self._file_prompts is not None:  # like GenEval: the file is the benchmark; train never sees it
            held = {p["prompt"] for p in self._file_prompts}
            prompts = self._file_prompts if split in ("test", "all") else [p for p in prompts if p["prompt"] not in held]
        return [EvalItem(p["prompt"], p["tag"], p) for p in prompts]

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        return [{"correct": c} for c in self.judge(images, [it.metadata for it in items])]

    def aggregate(self, scores, items) -> list[TaskMetric]:
        order = {t: i for i, t in enumerate(TASKS)}
        metrics = aggregate_by_task(scores, items)
        return sorted(metrics, key=lambda m: (m.metric, order.get(m.task, len(order))))


class RealGenEvalSuite(RealGenEvalScorer, GenEval):
    """GenEval on real images: GenEval-structured prompts, a transformers detector, CLIP colours."""

    def items(self, split: str = "test") -> list[EvalItem]:
        from jsbench.scoring.geneval_prompts import split_geneval_prompts

        return [EvalItem(p["prompt"], p["tag"], p) for p in split_geneval_prompts(self._prompts, split, self._train_seeds)]

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        metas = [it.metadata or self.metadata(it.prompt) for it in items]
        return [{"correct": c} for c in self.judge(images, metas)]

    def aggregate(self, scores, items) -> list[TaskMetric]:
        order = {t: i for i, t in enumerate(TASKS)}
        metrics = [m for m in aggregate_by_task(scores, items) if m.metric == "correct"]
        values = [s["correct"] for s in scores]
        n_prompts = len({it.prompt for it in items})
        if values:
            est = cluster_mean(values, [it.prompt for it in items])
            mean, se = est.value, est.stderr
            metrics.append(TaskMetric("overall", "correct_images", mean, se, len(values), n_prompts, est.df))
            per_prompt: dict[str, bool] = {}
            for s, it in zip(scores, items):
                per_prompt[it.prompt] = per_prompt.get(it.prompt, False) or s["correct"] > 0.5
            est = naive_mean([float(v) for v in per_prompt.values()])  # one value per prompt: its own cluster
            mean, se = est.value, est.stderr
            metrics.append(TaskMetric("overall", "correct_prompts", mean, se, len(values), n_prompts, est.df))
        return sorted(metrics, key=lambda m: (m.metric, order.get(m.task, len(order))))


@register_suite("geneval")
def _suite(backbone=None, **options) -> GenEval:
    """The embedded world's suite on the analytic backbone (no options, or only `metadata=PATH`), else
    `RealGenEvalSuite`."""
    if draws_embedded_world(backbone) and not options:
        return GenEvalSuite(backbone)
    if draws_embedded_world(backbone) and set(options) == {"metadata"}:
        return GenEvalSuite(backbone).use_metadata(options["metadata"])
    return RealGenEvalSuite(backbone, **options)

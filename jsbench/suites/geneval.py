"""GenEval: compositional prompts scored by object detection with GenEval's rules.

On the embedded world the prompts are the world's own six-task set (shapes for COCO classes), or a
GenEval metadata file over them (`metadata=PATH`, hand-edited rules allowed), and the detector is the
world's exact detector on the rendered pixels. Per image: `correct` (0/1). Aggregate:
per-task means and `overall`, the mean of the six task means (GenEval's headline number).

On a real backbone (`RealGenEvalSuite`) the prompts are GenEval's official 553
(`jsbench.suites.geneval_prompts`, its generator at seed 43, byte for byte) or any
`evaluation_metadata.jsonl` (`metadata=PATH`); training prompts come from the same generator under other
seeds, minus every entry whose rules equal a test entry's. The detector (`jsbench.rewards.detectors`) is
`detector=` a spec or an object, else $JSBENCH_GENEVAL_DETECTOR, else Mask2Former (COCO instance, from
transformers); `owl` and `mmdet` (the official one, when mmdet is installed) are options. Each image is
detected against its own prompt's classes, so its verdict never depends on the other prompts of a batch.
Colours come from GenEval's CLIP rule on the detection's mask over grey #999 (`color_model="ARCH:TAG"`,
else $JSBENCH_GENEVAL_COLOR_MODEL, else ViT-L-14:openai, fp32 weights). Models load on first scoring,
local files only; `provenance()` names them (and the prompt set's sha256) without loading anything.
Aggregates add GenEval's summary lines: `correct_images` (share of images correct) and
`correct_prompts` (share of prompts with at least one correct image), both under task `overall`.
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
        if not _is_analytic(backbone):
            raise JsbenchError(
                f"the embedded-world geneval suite runs on backbones that draw the embedded world (analytic, scenes-dit); use load_suite('geneval', backbone) for {backbone.name!r}"
            )
        from jsbench.world.detect import detect
        from jsbench.world.scenes import make_prompts, split_prompts

        # a backbone may draw a variant of the world with its own prompts and detector (`detail`)
        self._world = getattr(backbone, "geneval_world", None)
        self._detect = self._world.detect if self._world is not None else detect
        self._prompts = self._world.geneval_prompts() if self._world is not None else make_prompts()
        self._split = split_prompts
        self._by_prompt = {p["prompt"]: p for p in self._prompts}

    _file_prompts: list[dict] | None = None  # set by `use_metadata`

    def provenance(self) -> dict:
        """The world's exact detector finds objects and their colours from the rendered pixels."""
        from jsbench.rewards.detectors import WORLD_ID

        detector = getattr(self._world, "detector_id", WORLD_ID)
        return {"detector": detector, "color_model": WORLD_ID}

    def use_metadata(self, path) -> "GenEvalSuite":
        """Evaluate on a GenEval metadata file (hand-edited rules included) instead of the world's test
        split. Its prompts must be ones the world draws, its classes and colours the world's: a
        detector that can never see a class would score 0 in silence, so such a line is refused."""
        from jsbench.suites.geneval_prompts import load_metadata
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
        prompts = self._split(self._prompts, split)
        if self._file_prompts is not None:  # like GenEval: the file is the benchmark; train never sees it
            held = {p["prompt"] for p in self._file_prompts}
            prompts = self._file_prompts if split in ("test", "all") else [p for p in prompts if p["prompt"] not in held]
        return [EvalItem(p["prompt"], p["tag"], p) for p in prompts]

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


def _is_analytic(backbone) -> bool:
    """Whether the backbone draws the embedded scene world (`analytic`, and `scenes-dit`, trained on its
    renders): its images are scored by the world's own prompts and exact detector. Backbones say so
    with the protocol's optional attribute `draws_embedded_world = True`."""
    return backbone is None or bool(getattr(backbone, "draws_embedded_world", False))


class RealGenEvalSuite:
    """GenEval on real images: GenEval-structured prompts, a transformers detector, CLIP colours."""

    name = "geneval"
    primary_metric = "correct"

    def __init__(
        self,
        backbone=None,
        metadata: str | None = None,
        detector=None,
        color_model: str | None = None,
        color_classifier=None,
        seed: int | None = None,
        train_seeds=None,
        device=None,
    ):
        from jsbench.suites.geneval_prompts import OFFICIAL_SEED, TRAIN_SEEDS, load_metadata, make_geneval_prompts

        seed = OFFICIAL_SEED if seed is None else seed
        self._prompts = load_metadata(metadata) if metadata is not None else make_geneval_prompts(seed)
        self._train_seeds = tuple(train_seeds) if train_seeds is not None else tuple(s for s in TRAIN_SEEDS if s != seed) or (seed + 1,)
        self._by_prompt = {p["prompt"]: p for p in self._prompts}
        self._detector_spec = detector
        self._detector = None if detector is None or isinstance(detector, str) else detector
        self._color = color_classifier
        self._color_model = color_model
        self._device = device if device is not None else getattr(backbone, "device", None)

    def provenance(self) -> dict:
        """What produced this suite's scores, known without loading a model: the detector, the colour
        model, and the sha256 of the test prompt set (GenEval's serialisation; the official file's hash for
        the official prompts)."""
        from jsbench.rewards.detectors import ColorClassifier, detector_id
        from jsbench.suites.geneval_prompts import prompt_set_hash

        if self._detector is not None:
            det = str(getattr(self._detector, "id", None) or getattr(self._detector, "name", "custom"))
        else:
            det = detector_id(self._detector_spec)
        color = (self._color if self._color is not None else ColorClassifier(spec=self._color_model)).id
        return {"detector": det, "color_model": color, "prompt_set": prompt_set_hash(self._prompts)}

    @property
    def detector(self):
        if self._detector is None:
            from jsbench.rewards.detectors import load_detector

            self._detector = load_detector(self._detector_spec, device=self._device)
        return self._detector

    @property
    def color_classifier(self):
        if self._color is None:
            from jsbench.rewards.detectors import ColorClassifier

            self._color = ColorClassifier(spec=self._color_model)
        return self._color

    def items(self, split: str = "test") -> list[EvalItem]:
        from jsbench.suites.geneval_prompts import split_geneval_prompts

        return [EvalItem(p["prompt"], p["tag"], p) for p in split_geneval_prompts(self._prompts, split, self._train_seeds)]

    def metadata(self, prompt: str) -> dict:
        meta = self._by_prompt.get(prompt)
        if meta is None:
            from jsbench.suites.geneval_prompts import split_geneval_prompts

            for p in split_geneval_prompts(self._prompts, "train", self._train_seeds):
                self._by_prompt.setdefault(p["prompt"], p)
            meta = self._by_prompt.get(prompt)
        if meta is None:
            raise JsbenchError(f"prompt {prompt!r} is not part of the geneval suite")
        return meta

    def _colorize(self, image: torch.Tensor, dets: list, meta: dict) -> list:
        """Give a colour to the detections GenEval's colour rule looks at: the top-`count` boxes of
        every include group that names a colour."""
        from dataclasses import replace

        from jsbench.rewards.geneval import group_detections

        groups = group_detections(dets, meta.get("tag", ""))
        colored = {}
        for req in meta.get("include", []):
            if "color" not in req:
                continue
            found = groups.get(req["class"], [])[: int(req["count"])]
            masks = [d.mask for d in found] if found and all(d.mask is not None for d in found) else None
            for det, color in zip(found, self.color_classifier.classify(image, [d.box for d in found], req["class"], masks=masks)):
                colored[id(det)] = replace(det, color=color)
        return [colored.get(id(d), d) for d in dets]

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        if images.shape[0] != len(items):
            raise ValueError(f"{images.shape[0]} images for {len(items)} items")
        metas = [it.metadata or self.metadata(it.prompt) for it in items]
        # each image's own classes: what one prompt names never changes another image's detections
        classes = [list(dict.fromkeys(r["class"] for key in ("include", "exclude") for r in m.get(key, []))) for m in metas]
        detections = self.detector.detect(images, classes)
        out = []
        for image, dets, meta in zip(images, detections, metas):
            if any("color" in r for r in meta.get("include", [])):
                dets = self._colorize(image, dets, meta)
            out.append({"correct": float(evaluate_detections(dets, meta)[0])})
        return out

    def aggregate(self, scores, items) -> list[TaskMetric]:
        from jsbench.splits import mean_stderr

        order = {t: i for i, t in enumerate(TASKS)}
        metrics = [m for m in aggregate_by_task(scores, items) if m.metric == "correct"]
        values = [s["correct"] for s in scores]
        n_prompts = len({it.prompt for it in items})
        if values:
            mean, se = mean_stderr(values)
            metrics.append(TaskMetric("overall", "correct_images", mean, se, len(values), n_prompts))
            per_prompt: dict[str, bool] = {}
            for s, it in zip(scores, items):
                per_prompt[it.prompt] = per_prompt.get(it.prompt, False) or s["correct"] > 0.5
            mean, se = mean_stderr([float(v) for v in per_prompt.values()])
            metrics.append(TaskMetric("overall", "correct_prompts", mean, se, len(values), n_prompts))
        return sorted(metrics, key=lambda m: (m.metric, order.get(m.task, len(order))))


class GenEvalReward:
    """1.0 when the image passes GenEval's checks for its prompt, else 0.0."""

    name = "geneval"

    def __init__(self, backbone=None, **options):
        self.suite = GenEvalSuite(backbone) if _is_analytic(backbone) and not options else RealGenEvalSuite(backbone, **options)

    def __call__(self, images: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        items = [EvalItem(p, "", self.suite.metadata(p)) for p in prompts]
        return torch.tensor([s["correct"] for s in self.suite.score(images, items)], dtype=torch.float32)


@register_suite("geneval")
def _suite(backbone=None, **options):
    """The embedded world's suite on the analytic backbone (no options, or only `metadata=PATH`), else
    `RealGenEvalSuite`."""
    if _is_analytic(backbone) and not options:
        return GenEvalSuite(backbone)
    if _is_analytic(backbone) and set(options) == {"metadata"}:
        return GenEvalSuite(backbone).use_metadata(options["metadata"])
    return RealGenEvalSuite(backbone, **options)


@register_reward("geneval")
def _reward(backbone=None) -> GenEvalReward:
    return GenEvalReward(backbone)

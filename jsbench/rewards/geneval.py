"""The `geneval` reward, and the two GenEval scorers it shares with the `geneval` suite.

A scorer knows a prompt set's GenEval metadata and turns images into GenEval verdicts (1.0 correct, 0.0
not) with the rules of `jsbench.scoring.geneval`:
- `WorldGenEvalScorer`: the embedded world's prompts and its exact detector on the rendered pixels
  (`jsbench.world.detect`, or a backbone's own world: `geneval_world`).
- `RealGenEvalScorer`: GenEval's official prompts (or any metadata file), a real detector
  (`jsbench.rewards.detectors`) and GenEval's CLIP colour rule (`jsbench.rewards.color_classifier`),
  loaded on first scoring, local files only.
The suite (`jsbench.suites.geneval`) adds items, splits, aggregation and (on the embedded world) a GenEval
metadata file over the world's prompts on top of these classes.
"""

from __future__ import annotations

from typing import Sequence

import torch

from jsbench import JsbenchError
from jsbench.rewards import Reward, register_reward
from jsbench.scoring.geneval import evaluate_detections

__all__ = ["WorldGenEvalScorer", "RealGenEvalScorer", "GenEvalReward", "draws_embedded_world", "geneval_scorer"]


def draws_embedded_world(backbone) -> bool:
    """Whether the backbone draws the embedded scene world (`analytic`, and `scenes-dit`, trained on its
    renders): its images are scored by the world's own prompts and exact detector. Backbones say so
    with the protocol's attribute `draws_embedded_world`; None stands for the embedded world itself."""
    return backbone is None or bool(backbone.draws_embedded_world)


class WorldGenEvalScorer:
    """GenEval verdicts on the embedded world: its prompts and its exact detector."""

    def __init__(self, backbone=None):
        if not draws_embedded_world(backbone):
            raise JsbenchError(
                f"the embedded-world geneval suite runs on backbones that draw the embedded world (analytic, scenes-dit); use load_suite('geneval', backbone) for {backbone.name!r}"
            )
        from jsbench.world.detect import detect
        from jsbench.world.scenes import make_prompts

        # a backbone may draw a variant of the world with its own prompts and detector (`detail`)
        self._world = backbone.geneval_world if backbone is not None else None
        self._detect = self._world.detect if self._world is not None else detect
        self._prompts = self._world.geneval_prompts() if self._world is not None else make_prompts()
        self._by_prompt = {p["prompt"]: p for p in self._prompts}

    def provenance(self) -> dict:
        """The world's exact detector finds objects and their colours from the rendered pixels."""
        from jsbench.rewards.detectors import WORLD_ID

        detector = getattr(self._world, "detector_id", WORLD_ID)
        return {"detector": detector, "color_model": WORLD_ID}

    def metadata(self, prompt: str) -> dict:
        meta = self._by_prompt.get(prompt)
        if meta is None:
            raise JsbenchError(f"prompt {prompt!r} is not part of the geneval suite")
        return meta

    def judge(self, images: torch.Tensor, metas: Sequence[dict]) -> list[float]:
        """1.0 or 0.0 per image: GenEval's verdict on its metadata entry."""
        if images.shape[0] != len(metas):
            raise ValueError(f"{images.shape[0]} images for {len(metas)} items")
        return [float(evaluate_detections(d, m)[0]) for d, m in zip(self._detect(images), metas)]


class RealGenEvalScorer:
    """GenEval verdicts on real images: GenEval-structured prompts, a transformers detector, CLIP colours."""

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
        from jsbench.scoring.geneval_prompts import OFFICIAL_SEED, TRAIN_SEEDS, load_metadata, make_geneval_prompts

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
        from jsbench.rewards.color_classifier import ColorClassifier
        from jsbench.rewards.detectors import detector_id
        from jsbench.scoring.geneval_prompts import prompt_set_hash

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
            from jsbench.rewards.color_classifier import ColorClassifier

            self._color = ColorClassifier(spec=self._color_model)
        return self._color

    def metadata(self, prompt: str) -> dict:
        meta = self._by_prompt.get(prompt)
        if meta is None:
            from jsbench.scoring.geneval_prompts import split_geneval_prompts

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

        from jsbench.scoring.geneval import group_detections

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

    def judge(self, images: torch.Tensor, metas: Sequence[dict]) -> list[float]:
        """1.0 or 0.0 per image: GenEval's verdict on its metadata entry."""
        if images.shape[0] != len(metas):
            raise ValueError(f"{images.shape[0]} images for {len(metas)} items")
        # each image's own classes: what one prompt names never changes another image's detections
        classes = [list(dict.fromkeys(r["class"] for key in ("include", "exclude") for r in m.get(key, []))) for m in metas]
        detections = self.detector.detect(images, classes)
        out = []
        for image, dets, meta in zip(images, detections, metas):
            if any("color" in r for r in meta.get("include", [])):
                dets = self._colorize(image, dets, meta)
            out.append(float(evaluate_detections(dets, meta)[0]))
        return out


def geneval_scorer(backbone=None, **options):
    """The embedded world's scorer for a backbone that draws it and no options, else the real one."""
    return WorldGenEvalScorer(backbone) if draws_embedded_world(backbone) and not options else RealGenEvalScorer(backbone, **options)


class GenEvalReward(Reward):
    """1.0 when the image passes GenEval's checks for its prompt, else 0.0."""

    name = "geneval"

    def __init__(self, backbone=None, **options):
        self.scorer = geneval_scorer(backbone, **options)

    def __call__(self, images: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        metas = [self.scorer.metadata(p) for p in prompts]
        return torch.tensor(self.scorer.judge(images, metas), dtype=torch.float32)


@register_reward("geneval")
def _reward(backbone=None) -> GenEvalReward:
    return GenEvalReward(backbone)

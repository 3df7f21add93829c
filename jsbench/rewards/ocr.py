"""The `ocr` and `ocr-flowgrpo` rewards: an OCR engine (`jsbench.rewards.ocr_engines`) reads each image and
the prompt's quoted text is scored against what it read (MARIO-Eval's metrics: `jsbench.scoring.text`).

Metrics follow MARIO-Eval (TextDiffuser), under its names (`jsbench.scoring.text`); the `ocr` reward is
Flow-GRPO's code's: 1 - min(dist, len) / len on the space-free lowercase target and read text, full
reward when the target occurs inside the read text (`jsbench.scoring.text.ocr_reward` names what differs).
Reward and suite refuse a backbone that cannot draw text (`require_text_backbone`) before any sampling.
"""

from __future__ import annotations

from typing import Sequence

import torch

from jsbench import JsbenchError
from jsbench.rewards import Reward, register_reward
from jsbench.rewards.ocr_engines import OcrEngine, default_engine, load_engine, read_detections
from jsbench.scoring.flowgrpo import flowgrpo_reward, flowgrpo_target
from jsbench.scoring.text import ocr_reward, target_words

__all__ = ["OcrReward", "FlowGrpoOcrReward", "require_text_backbone"]


def require_text_backbone(backbone, what: str) -> None:
    """One line (JsbenchError) when `backbone` (or its class) cannot draw text (`Backbone.draws_text`): OCR
    would score images with no text in them."""
    if not backbone.draws_text:
        raise JsbenchError(
            f"{what} needs a backbone that draws text; {backbone.name} draws an embedded world without text: use "
            "--backbone analytic (the embedded text world) or a text-to-image model (sdxl, sd35, flux-dev)"
        )


class _EngineReward(Reward):
    """A reward that reads each image with an OCR engine (by name, or one already built; default: the
    installed engine jsbench prefers), and says which in its provenance."""

    name = ""

    def __init__(self, engine: str | OcrEngine | None = None, **engine_options):
        engine = default_engine() if engine is None else engine
        self.engine = load_engine(engine, **engine_options) if isinstance(engine, str) else engine

    def provenance(self) -> dict:
        """What the reward is and what read for it (a training run's manifest records it)."""
        return {"reward": self.name, "ocr_engine": self.engine.name}


class OcrReward(_EngineReward):
    """The `ocr` reward, Flow-GRPO's: 1 - min(dist, len)/len of what the engine reads vs the prompt's quoted
    text, 1 when the read text contains it (`contains_ok=False`: the plain formula)."""

    name = "ocr"

    def __init__(self, engine: str | OcrEngine | None = None, contains_ok: bool = True, **engine_options):
        super().__init__(engine, **engine_options)
        self.contains_ok = contains_ok

    def check_prompts(self, prompts: Sequence[str]) -> None:
        """One line naming the first prompt with no quoted text."""
        for p in prompts:
            if not target_words(p):
                raise JsbenchError(f"the ocr reward needs quoted text in every prompt; none in {p!r}")

    def __call__(self, images: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        prompts = list(prompts)
        if len(prompts) != images.shape[0]:
            raise ValueError(f"{len(prompts)} prompts for {images.shape[0]} images")
        self.check_prompts(prompts)
        targets = [" ".join(target_words(p)) for p in prompts]
        texts = self.engine.read(images)
        values = [ocr_reward(r, t, self.contains_ok) for r, t in zip(texts, targets)]
        return torch.tensor(values, dtype=torch.float32)


class FlowGrpoOcrReward(_EngineReward):
    """The `ocr-flowgrpo` reward, Flow-GRPO's flow_grpo/ocr.py (`jsbench.scoring.flowgrpo`): the first
    double-quoted span against the engine's detections joined, ASCII spaces removed. It scores no prompt that
    quotes only with single quotes, as the text world's own do (MARIO-Eval's style): training refuses those
    before it starts; on a prompt file quoting one double-quoted span of plain words it equals `ocr`. It
    differs on prompts with several quoted spans or with curly quotes, and where a detection holds a tab or a
    newline."""

    name = "ocr-flowgrpo"

    def check_prompts(self, prompts: Sequence[str]) -> None:
        """One line naming the first prompt Flow-GRPO's rule cannot score (no double-quoted target)."""
        for p in prompts:
            flowgrpo_target(p)

    def __call__(self, images: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        prompts = list(prompts)
        if len(prompts) != images.shape[0]:
            raise ValueError(f"{len(prompts)} prompts for {images.shape[0]} images")
        self.check_prompts(prompts)  # refused before any reading
        values = [flowgrpo_reward(lines, p) for lines, p in zip(read_detections(self.engine, images), prompts)]
        return torch.tensor(values, dtype=torch.float32)


@register_reward("ocr")
def _ocr_reward(backbone=None, engine: str | None = None, **options) -> OcrReward:
    """OCR reads pixels, so any backbone that draws text will do; the engine is $JSBENCH_OCR_ENGINE or rapidocr."""
    if backbone is not None:
        require_text_backbone(backbone, "the ocr reward")
    return OcrReward(engine, **options)


@register_reward("ocr-flowgrpo")
def _flowgrpo_ocr_reward(backbone=None, engine: str | None = None, **options) -> FlowGrpoOcrReward:
    """Flow-GRPO's OCR reward as its code computes it; the engine as for `ocr`."""
    if backbone is not None:
        require_text_backbone(backbone, "the ocr-flowgrpo reward")
    return FlowGrpoOcrReward(engine, **options)

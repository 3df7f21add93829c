"""OWLv2 / OWL-ViT as a GenEval detector (`owl[:MODEL]`): open-vocabulary, queried with the classes each
image's prompt names; per-class thresholds and non-maximum suppression. jsbench/rewards/detectors.py
describes the spec and loads it."""

from __future__ import annotations

from typing import Sequence

import torch

from jsbench.devices import AUTO, pick_device
from jsbench.rewards.detectors import DEFAULT_OWL, MIN_SCORE, local_pretrained, per_image_classes, preprocessor_config
from jsbench.scoring.geneval import CLASSES, Detection

__all__ = ["OwlDetector", "nms", "owl_postprocess"]

NMS_IOU = 0.5


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou: float = NMS_IOU) -> torch.Tensor:
    """Indices kept by greedy non-maximum suppression (highest score first), boxes [N, 4] x0y0x1y1."""
    order = scores.argsort(descending=True)
    keep: list[int] = []
    area = (boxes[:, 2] - boxes[:, 0]).clamp_min(0) * (boxes[:, 3] - boxes[:, 1]).clamp_min(0)
    suppressed = torch.zeros(len(boxes), dtype=torch.bool)
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        lt = torch.maximum(boxes[i, :2], boxes[:, :2])
        rb = torch.minimum(boxes[i, 2:], boxes[:, 2:])
        inter = (rb - lt).clamp_min(0).prod(-1)
        overlap = inter / (area[i] + area - inter).clamp_min(1e-9)
        suppressed |= overlap > iou
    return torch.tensor(keep, dtype=torch.long)


def owl_postprocess(
    logits: torch.Tensor,
    pred_boxes: torch.Tensor,
    classes: Sequence[str],
    sizes: Sequence[tuple[int, int]],
    padded: bool,
    min_score: float = MIN_SCORE,
    iou: float = NMS_IOU,
) -> list[list[Detection]]:
    """OWL outputs -> detections. logits [B, Q, C], pred_boxes [B, Q, 4] (cx, cy, w, h) in [0, 1] of
    the model input; `sizes` the (H, W) of each original image; `padded` when the input was the image
    padded to a square at the bottom/right (OWLv2), so boxes scale by max(H, W).

    Every class is scored on its own column of sigmoid scores, thresholded and suppressed alone, as the
    official pipeline scores each class: a box may count for two classes, and a class's detections do not
    depend on which other classes were queried with it."""
    probs = torch.sigmoid(logits.float())
    cx, cy, w, h = pred_boxes.float().unbind(-1)
    corners = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
    out: list[list[Detection]] = []
    for b, (height, width) in enumerate(sizes):
        sx, sy = (max(height, width),) * 2 if padded else (width, height)
        boxes = corners[b] * torch.tensor([sx, sy, sx, sy], dtype=torch.float32)
        boxes = torch.stack(
            [boxes[:, 0].clamp(0, width), boxes[:, 1].clamp(0, height), boxes[:, 2].clamp(0, width), boxes[:, 3].clamp(0, height)], -1
        )
        dets: list[Detection] = []
        for c, name in enumerate(classes):  # each class on its own scores: a box may count for two classes
            scores = probs[b, :, c]
            idx = torch.nonzero(scores >= min_score).flatten()
            if len(idx) == 0:
                continue
            kept = idx[nms(boxes[idx], scores[idx], iou)]
            for i in kept.tolist():
                dets.append(Detection(name, tuple(float(v) for v in boxes[i]), float(scores[i])))
        out.append(sorted(dets, key=lambda d: -d.confidence))
    return out


class OwlDetector:
    """OWLv2 / OWL-ViT (transformers) as an open-vocabulary detector over each image's own class names."""

    name = "owl"

    def __init__(self, model, tokenizer, image_size: int | None = None, mean=None, std=None, device=None,
                 min_score: float = MIN_SCORE, model_id: str = "custom"):  # fmt: skip
        from jsbench.rewards.clip import OPENAI_MEAN, OPENAI_STD

        self.device = pick_device(device, default=AUTO)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.id = f"owl:{model_id}"
        config = model.config
        self.padded = getattr(config, "model_type", "") == "owlv2"
        self.image_size = int(image_size or config.vision_config.image_size)
        self.mean = torch.tensor(mean or OPENAI_MEAN, dtype=torch.float32).view(1, 3, 1, 1).to(self.device)
        self.std = torch.tensor(std or OPENAI_STD, dtype=torch.float32).view(1, 3, 1, 1).to(self.device)
        self.min_score = min_score
        self.max_text_len = min(16, int(config.text_config.max_position_embeddings))

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        x = images.to(self.device, torch.float32).clamp(0, 1)
        if self.padded:  # OWLv2: pad to a square with grey at the bottom/right
            h, w = x.shape[-2:]
            s = max(h, w)
            x = torch.nn.functional.pad(x, (0, s - w, 0, s - h), value=0.5)
        x = torch.nn.functional.interpolate(x, size=(self.image_size,) * 2, mode="bilinear", align_corners=False, antialias=True)
        return (x - self.mean) / self.std

    @torch.no_grad()
    def raw(self, images: torch.Tensor, classes: Sequence[str]):
        """The model's outputs for the batch against queries "a photo of a {class}"."""
        queries = [f"a photo of a {c}" for c in classes]
        tokens = self.tokenizer(queries, padding="max_length", max_length=self.max_text_len, truncation=True, return_tensors="pt")
        b = images.shape[0]
        input_ids = tokens["input_ids"].repeat(b, 1).to(self.device)
        mask = tokens["attention_mask"].repeat(b, 1).to(self.device)
        return self.model(input_ids=input_ids, pixel_values=self.preprocess(images), attention_mask=mask)

    def detect(self, images: torch.Tensor, classes=None) -> list[list[Detection]]:
        """Each image against its own classes (all 80 when none are given), one forward per image."""
        wanted = per_image_classes(classes, images.shape[0])
        out = []
        for image, names in zip(images, wanted):
            names = list(names or CLASSES)
            raw = self.raw(image[None], names)
            out += owl_postprocess(raw.logits.cpu(), raw.pred_boxes.cpu(), names, [tuple(image.shape[-2:])], self.padded, self.min_score)
        return out

    @classmethod
    def from_pretrained(cls, model_id: str | None = None, device=None) -> "OwlDetector":
        """Weights from a local folder or the HF cache only; one line naming the model when absent."""
        from transformers import AutoModelForZeroShotObjectDetection, AutoTokenizer

        model_id = model_id or DEFAULT_OWL
        model = local_pretrained(AutoModelForZeroShotObjectDetection, model_id, "OWL")
        tokenizer = local_pretrained(AutoTokenizer, model_id, "OWL tokenizer")
        cfg = preprocessor_config(model_id)
        return cls(model, tokenizer, mean=cfg.get("image_mean"), std=cfg.get("image_std"), device=device, model_id=model_id)

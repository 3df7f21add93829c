"""Object detectors for GenEval, behind one protocol, and GenEval's CLIP colour classifier.

`Detector.detect(images [B, 3, H, W] in [0, 1], classes=None) -> list[list[Detection]]`: boxes in
pixels of the given image, a confidence, a class name. `classes` names what an open-vocabulary
detector should look for (GenEval's prompt metadata: every include and exclude class); a closed-set
detector ignores it.

- `world`: the embedded world's exact detector (`jsbench.world.detect.detect`).
- `owl`: OWLv2 / OWL-ViT from transformers (`AutoModelForZeroShotObjectDetection`), weights from a
  local folder or the Hugging Face cache only (default `google/owlv2-base-patch16-ensemble`,
  $JSBENCH_GENEVAL_DETECTOR overrides). Queries are "a photo of a {class}"; preprocessing runs in
  torch (OWLv2 pads to a square with grey at the bottom/right, then resizes), post-processing is
  OWL's: sigmoid of the class logits, the best class per box, centre boxes to corners scaled to the
  (padded) image, then per-class non-maximum suppression (IoU 0.5) so one object is counted once.
  OWL has no masks, so colour is classified on the box crop. Its scores are not Mask2Former's: the
  0.3 / 0.9 thresholds of GenEval's rules are calibrated for the latter, so numbers from `owl` are
  comparable between schedules, not with published GenEval tables.
- `mmdet`: the official GenEval detector (Mask2Former Swin-S, mmdet config
  mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco). Not implemented in this release: it refuses with
  what is missing rather than returning anything.

`ColorClassifier`: GenEval's colour rule -- composite the object's mask (the box when there is none)
on grey, crop its box, and classify zero-shot with CLIP over the ten colours, with GenEval's three
templates per colour ("a photo of a {c} {cls}", "a photo of a {c}-colored {cls}", "a photo of a {c}
object"), embeddings averaged then renormalised. open_clip ViT-L-14 by default (the `rewards` extra).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol, Sequence

import torch

from jsbench import JsbenchError
from jsbench.rewards.geneval import Detection

__all__ = [
    "Detector",
    "DetectorUnavailable",
    "WorldDetector",
    "OwlDetector",
    "MMDetDetector",
    "ColorClassifier",
    "load_detector",
    "default_detector_id",
    "nms",
    "owl_postprocess",
    "GENEVAL_COLORS",
    "DEFAULT_OWL",
]

DEFAULT_OWL = "google/owlv2-base-patch16-ensemble"
DETECTOR_ENV = "JSBENCH_GENEVAL_DETECTOR"
GENEVAL_COLORS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white")
COLOR_TEMPLATES = ("a photo of a {c} {cls}", "a photo of a {c}-colored {cls}", "a photo of a {c} object")
GREY = 128 / 255
MIN_SCORE = 0.1  # boxes below this never reach GenEval's rules (their lowest threshold is 0.3)
NMS_IOU = 0.5


class DetectorUnavailable(JsbenchError):
    """A detector that cannot run here; the message names what is missing and how to get it."""


class Detector(Protocol):
    name: str

    def detect(self, images: torch.Tensor, classes: Sequence[str] | None = None) -> list[list[Detection]]: ...


class WorldDetector:
    """The embedded world's exact detector (colour masks + connected components); ignores `classes`."""

    name = "world"

    def detect(self, images: torch.Tensor, classes: Sequence[str] | None = None) -> list[list[Detection]]:
        from jsbench.world.detect import detect

        return detect(images)


# --------------------------------------------------------------------------------------------- OWL


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
    padded to a square at the bottom/right (OWLv2), so boxes scale by max(H, W)."""
    probs = torch.sigmoid(logits.float())
    scores, labels = probs.max(-1)
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
        for c, name in enumerate(classes):
            idx = torch.nonzero((labels[b] == c) & (scores[b] >= min_score)).flatten()
            if len(idx) == 0:
                continue
            kept = idx[nms(boxes[idx], scores[b, idx], iou)]
            for i in kept.tolist():
                dets.append(Detection(name, tuple(float(v) for v in boxes[i]), float(scores[b, i])))
        out.append(sorted(dets, key=lambda d: -d.confidence))
    return out


class OwlDetector:
    """OWLv2 / OWL-ViT (transformers) as an open-vocabulary detector over the given class names."""

    name = "owl"

    def __init__(self, model, tokenizer, image_size: int | None = None, mean=None, std=None, device=None, min_score: float = MIN_SCORE):
        from jsbench.rewards.clip import OPENAI_MEAN, OPENAI_STD, default_device

        self.device = torch.device(device) if device is not None else default_device()
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
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

    def detect(self, images: torch.Tensor, classes: Sequence[str] | None = None) -> list[list[Detection]]:
        from jsbench.suites.geneval_prompts import COCO_CLASSES

        classes = list(dict.fromkeys(classes or COCO_CLASSES))
        out = self.raw(images, classes)
        sizes = [tuple(images.shape[-2:])] * images.shape[0]
        return owl_postprocess(out.logits.cpu(), out.pred_boxes.cpu(), classes, sizes, self.padded, self.min_score)

    @classmethod
    def from_pretrained(cls, model_id: str | None = None, device=None) -> "OwlDetector":
        """Weights from a local folder or the HF cache only; one line naming the model when absent."""
        model_id = model_id or default_detector_id()
        from transformers import AutoModelForZeroShotObjectDetection, AutoTokenizer

        try:
            model = AutoModelForZeroShotObjectDetection.from_pretrained(model_id, local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(model_id, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise DetectorUnavailable(
                f"GenEval detector {model_id!r} is not available locally ({type(exc).__name__}); fetch it with "
                f"`hf download {model_id}` or point ${DETECTOR_ENV} / detector= at a local folder"
            ) from None
        mean = std = None
        folder = Path(model_id)
        pre = folder / "preprocessor_config.json" if folder.is_dir() else None
        if pre is None:
            try:
                from huggingface_hub import hf_hub_download

                pre = Path(hf_hub_download(model_id, "preprocessor_config.json", local_files_only=True))
            except Exception:
                pre = None
        if pre is not None and pre.is_file():
            cfg = json.loads(pre.read_text())
            mean, std = cfg.get("image_mean"), cfg.get("image_std")
        return cls(model, tokenizer, mean=mean, std=std, device=device)


class MMDetDetector:
    """The official GenEval detector through mmdet; refuses clearly (never fakes results)."""

    name = "mmdet"
    CONFIG = "mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco"

    def __init__(self, *args, **kwargs):
        missing = []
        for module in ("mmdet", "mmcv", "mmengine"):
            try:
                __import__(module)
            except Exception:
                missing.append(module)
        if missing:
            raise DetectorUnavailable(
                f"the mmdet detector needs {', '.join(missing)} (GenEval's {self.CONFIG}); install mmdet/mmcv "
                "per GenEval's README, or use detector 'owl'"
            )
        raise DetectorUnavailable(f"the mmdet detector ({self.CONFIG}) is not implemented in this release; use detector 'owl'")

    def detect(self, images, classes=None):  # pragma: no cover - never constructed
        raise DetectorUnavailable("mmdet detector unavailable")


def default_detector_id() -> str:
    return os.environ.get(DETECTOR_ENV) or DEFAULT_OWL


def load_detector(name: str | None = None, device=None) -> Detector:
    """'world', 'mmdet', 'owl' (default model) or a model id / local folder for OWL."""
    if name == "world":
        return WorldDetector()
    if name == "mmdet":
        return MMDetDetector()
    if name in (None, "owl"):
        return OwlDetector.from_pretrained(None, device=device)
    return OwlDetector.from_pretrained(name, device=device)


# ------------------------------------------------------------------------------------------- colour


class ColorClassifier:
    """GenEval's zero-shot colour rule on a `ClipModel` (open_clip ViT-L-14 by default)."""

    def __init__(self, clip=None, colors: Sequence[str] = GENEVAL_COLORS, spec: str | None = None):
        self._clip = clip
        self._spec = spec
        self.colors = tuple(colors)
        self._classifiers: dict[str, torch.Tensor] = {}

    @property
    def clip(self):
        if self._clip is None:
            from jsbench.rewards.clip import clip_from_spec

            self._clip = clip_from_spec(self._spec or os.environ.get("JSBENCH_GENEVAL_COLOR_MODEL") or "ViT-L-14:openai")
        return self._clip

    def classifier(self, cls: str) -> torch.Tensor:
        """[n_colours, D]: per colour the mean of its normalised template embeddings, renormalised."""
        if cls not in self._classifiers:
            texts = [t.format(c=c, cls=cls) for c in self.colors for t in COLOR_TEMPLATES]
            feats = self.clip.text_features(texts).view(len(self.colors), len(COLOR_TEMPLATES), -1).mean(1)
            self._classifiers[cls] = torch.nn.functional.normalize(feats, dim=-1)
        return self._classifiers[cls]

    @staticmethod
    def crops(image: torch.Tensor, boxes: Sequence[Sequence[float]], masks: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Each object's mask composited on grey (128), cropped to its box (at least one pixel)."""
        _, h, w = image.shape
        out = []
        for i, box in enumerate(boxes):
            img = image
            if masks is not None:
                m = masks[i].to(image.dtype).to(image.device)
                img = image * m + GREY * (1 - m)
            x0, y0 = int(max(0, min(w - 1, box[0]))), int(max(0, min(h - 1, box[1])))
            x1, y1 = int(max(x0 + 1, min(w, round(box[2])))), int(max(y0 + 1, min(h, round(box[3]))))
            out.append(img[:, y0:y1, x0:x1])
        return out

    def classify(self, image: torch.Tensor, boxes, cls: str, masks=None) -> list[str]:
        """The colour name of each box of one image [3, H, W] (an object of class `cls`)."""
        if len(boxes) == 0:
            return []
        crops = self.crops(image, boxes, masks)
        feats = torch.cat([self.clip.image_features(c[None]) for c in crops])  # crops differ in size
        return [self.colors[i] for i in (feats @ self.classifier(cls).T).argmax(-1).tolist()]

"""Mask2Former detectors for GenEval (`mask2former`, `geneval-official:FOLDER`, `mmdet`): transformers'
Mask2Former with mmdet's test-time pre- and post-processing, GenEval's converted weights on it, and mmdet
itself when importable. jsbench/rewards/detectors.py describes each spec and loads them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from jsbench import JsbenchError
from jsbench.devices import AUTO, pick_device
from jsbench.rewards.detectors import (DEFAULT_MASK2FORMER, MIN_SCORE, MMDET_CONFIG, OFFICIAL_DETECTOR_ID, DetectorUnavailable,
                                       local_pretrained, official_id, official_provenance, preprocessor_config, to_uint8)
from jsbench.scoring.geneval import CLASSES, Detection

__all__ = ["Mask2FormerDetector", "GenevalOfficialDetector", "MMDetDetector", "mask2bbox", "mask2former_postprocess"]

MMDET_CONFIG_ENV = "JSBENCH_MMDET_CONFIG"
MMDET_CHECKPOINT_ENV = "JSBENCH_MMDET_CHECKPOINT"
MMDET_PAD_VALUE = 128  # the official test pipeline pads the 8-bit image with 128 before normalising
IMAGENET_MEAN_255 = (123.675, 116.28, 103.53)
IMAGENET_STD_255 = (58.395, 57.12, 57.375)


def mask2bbox(masks: torch.Tensor) -> torch.Tensor:
    """[N, H, W] bool -> [N, 4] float boxes (x0, y0, x1 + 1, y1 + 1) around each mask; zeros when empty."""
    n = masks.shape[0]
    out = torch.zeros(n, 4, dtype=torch.float32)
    if n == 0:
        return out
    cols, rows = masks.any(1).cpu(), masks.any(2).cpu()
    for i in range(n):
        x, y = torch.nonzero(cols[i]).flatten(), torch.nonzero(rows[i]).flatten()
        if len(x) and len(y):
            out[i] = torch.stack([x[0], y[0], x[-1] + 1, y[-1] + 1]).to(torch.float32)
    return out


def mask2former_postprocess(
    class_logits: torch.Tensor,
    mask_logits: torch.Tensor,
    input_size: tuple[int, int],
    valid_size: tuple[int, int],
    image_size: tuple[int, int],
    num_things: int = 80,
    max_per_image: int = 100,
    min_score: float = MIN_SCORE,
) -> list[Detection]:
    """One image's Mask2Former outputs -> detections, as mmdet's MaskFormerFusionHead does for instances.

    class_logits [Q, C + 1] (last = no object), mask_logits [Q, h, w] at 1/4 of `input_size` (the padded
    model input); `valid_size` the resized image inside it, `image_size` the original (H, W). The best
    `max_per_image` (query, class) pairs by class probability; masks upsampled to the input, cropped to
    the valid part, resized to the image (bilinear), cut at logit 0; score = class probability x mean
    mask probability inside the mask. Pairs whose class probability is at most `min_score` cannot score
    above it and are dropped before their masks are upsampled (only to save memory)."""
    num_classes = class_logits.shape[-1] - 1
    scores = F.softmax(class_logits.float(), -1)[:, :-1]
    k = min(max_per_image, scores.numel())
    top, index = scores.flatten().topk(k, sorted=False)
    labels, queries = index % num_classes, index // num_classes
    keep = (labels < num_things) & (top > min_score)
    top, labels, queries = top[keep], labels[keep], queries[keep]
    if len(top) == 0:
        return []
    masks = mask_logits[queries].float()[None]
    masks = F.interpolate(masks, size=input_size, mode="bilinear", align_corners=False)
    masks = masks[..., : valid_size[0], : valid_size[1]]
    masks = F.interpolate(masks, size=image_size, mode="bilinear", align_corners=False)[0]
    binary = masks > 0
    mask_score = (masks.sigmoid() * binary).flatten(1).sum(1) / (binary.flatten(1).sum(1) + 1e-6)
    det_scores = (top * mask_score).cpu()
    boxes = mask2bbox(binary)
    out = []
    for i in range(len(det_scores)):
        if det_scores[i] > min_score:
            out.append(Detection(CLASSES[int(labels[i])], tuple(float(v) for v in boxes[i]), float(det_scores[i]), mask=binary[i].cpu()))
    return out


class Mask2FormerDetector:
    """COCO instance Mask2Former from transformers, run like the official mmdet test path."""

    name = "mask2former"

    def __init__(
        self,
        model,
        model_id: str = "custom",
        device=None,
        scale: tuple[int, int] = (1333, 800),
        size_divisor: int = 32,
        mean: Sequence[float] = IMAGENET_MEAN_255,
        std: Sequence[float] = IMAGENET_STD_255,
        max_per_image: int = 100,
        min_score: float = MIN_SCORE,
    ):
        config = model.config
        self.num_labels = int(getattr(config, "num_labels", len(getattr(config, "id2label", {}))))
        if self.num_labels < len(CLASSES):
            raise DetectorUnavailable(
                f"GenEval detector {model_id!r} has {self.num_labels} classes; GenEval needs a COCO model (80 thing classes first)"
            )
        self.device = pick_device(device, default=AUTO)
        self.model = model.to(self.device).eval()
        self.model_id = model_id
        self.id = f"mask2former:{model_id}"
        self.scale = (max(scale), min(scale))
        self.size_divisor = int(size_divisor)
        self.mean = torch.tensor(mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.max_per_image = max_per_image
        self.min_score = min_score

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """mmcv's keep-ratio rescale: fit the long side in 1333 and the short side in 800."""
        factor = min(self.scale[0] / max(height, width), self.scale[1] / min(height, width))
        return int(height * factor + 0.5), int(width * factor + 0.5)

    def preprocess(self, images: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        """[B, 3, H, W] in [0, 1] -> (normalised, zero-padded input [B, 3, Hp, Wp], resized (h, w))."""
        x = to_uint8(images).to(self.device).float()
        h, w = self.resized_size(*x.shape[-2:])
        if (h, w) != tuple(x.shape[-2:]):
            x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False).round().clamp(0, 255)
        x = (x - self.mean) / self.std
        d = self.size_divisor
        ph, pw = -(-h // d) * d, -(-w // d) * d
        return F.pad(x, (0, pw - w, 0, ph - h), value=0.0), (h, w)

    @torch.no_grad()
    def raw(self, images: torch.Tensor):
        pixels, valid = self.preprocess(images)
        return self.model(pixel_values=pixels), tuple(pixels.shape[-2:]), valid

    def detect(self, images: torch.Tensor, classes=None) -> list[list[Detection]]:
        """Every image on its own: a closed-set detector's output depends on the image alone."""
        out = []
        for image in images:
            outputs, input_size, valid = self.raw(image[None])
            out.append(
                mask2former_postprocess(
                    outputs.class_queries_logits[0], outputs.masks_queries_logits[0], input_size, valid,
                    tuple(image.shape[-2:]), len(CLASSES), self.max_per_image, self.min_score,
                )
            )  # fmt: skip
        return out

    @classmethod
    def from_pretrained(cls, model_id: str | None = None, device=None) -> "Mask2FormerDetector":
        from transformers import Mask2FormerForUniversalSegmentation

        model_id = model_id or DEFAULT_MASK2FORMER
        model = local_pretrained(Mask2FormerForUniversalSegmentation, model_id, "Mask2Former, COCO instance")
        cfg = preprocessor_config(model_id)
        options = {}
        if cfg.get("image_mean") and cfg.get("image_std"):
            options = {"mean": [255 * v for v in cfg["image_mean"]], "std": [255 * v for v in cfg["image_std"]]}
        return cls(model, model_id=model_id, device=device, size_divisor=int(cfg.get("size_divisor") or 32), **options)


class GenevalOfficialDetector(Mask2FormerDetector):
    """GenEval's official detector weights (converted from its mmdet checkpoint) run through mmdet's test
    path: OpenCV's bilinear resize of the 8-bit image, padding with 128, normalisation, Mask2Former."""

    name = "geneval-official"

    def __init__(self, model, folder: str | Path, provenance: dict, device=None, min_score: float = MIN_SCORE):
        super().__init__(model, model_id=str(folder), device=device, max_per_image=100, min_score=min_score)
        self.provenance = provenance
        self.id = official_id(provenance)

    def preprocess(self, images: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        """[B, 3, H, W] in [0, 1] -> (the padded, normalised input [B, 3, Hp, Wp], resized (h, w)), as
        mmcv's Resize (cv2.INTER_LINEAR on uint8), Pad (128, to a multiple of 32) and Normalize do it."""
        import cv2

        pictures = to_uint8(images).permute(0, 2, 3, 1).cpu().numpy()
        h, w = self.resized_size(*pictures.shape[1:3])
        d = self.size_divisor
        ph, pw = -(-h // d) * d, -(-w // d) * d
        mean = np.float32(IMAGENET_MEAN_255)
        inv_std = np.float32(1 / np.float64(IMAGENET_STD_255))
        out = np.full((len(pictures), ph, pw, 3), MMDET_PAD_VALUE, np.float32)
        for i, picture in enumerate(pictures):
            if (h, w) != picture.shape[:2]:
                picture = cv2.resize(picture, (w, h), interpolation=cv2.INTER_LINEAR)
            out[i, :h, :w] = picture
        out = (out - mean) * inv_std
        dtype = next(self.model.parameters()).dtype
        return torch.from_numpy(out).permute(0, 3, 1, 2).to(self.device, dtype), (h, w)

    @classmethod
    def from_folder(cls, folder: str | Path, device=None) -> "GenevalOfficialDetector":
        from transformers import Mask2FormerForUniversalSegmentation

        try:
            import cv2  # noqa: F401  (mmdet resizes with OpenCV; another resize moves mask edges)
        except ImportError:
            raise DetectorUnavailable("the geneval-official detector resizes with OpenCV as mmdet does: pip install opencv-python-headless") from None
        provenance = official_provenance(folder)
        model = local_pretrained(Mask2FormerForUniversalSegmentation, str(folder), "GenEval's converted mmdet weights")
        return cls(model, folder, provenance, device=device)


# --------------------------------------------------------------------------------------------- mmdet


class MMDetDetector:
    """The official GenEval detector through mmdet (2.x or 3.x), when mmdet is importable."""

    name = "mmdet"
    CONFIG = MMDET_CONFIG
    id = OFFICIAL_DETECTOR_ID

    def __init__(self, config: str | None = None, checkpoint: str | None = None, device=None, min_score: float = MIN_SCORE, model=None):
        try:
            import mmdet
            from mmdet.apis import inference_detector, init_detector
        except Exception as exc:
            raise DetectorUnavailable(
                f"the mmdet detector needs mmdet ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); install "
                "mmdet and mmcv as GenEval's README says, or use the default detector (mask2former)"
            ) from None
        self._inference = inference_detector
        self.min_score = min_score
        if model is None:
            config = config or os.environ.get(MMDET_CONFIG_ENV) or str(
                Path(mmdet.__file__).parent.parent / "configs" / "mask2former" / f"{self.CONFIG}.py"
            )
            checkpoint = checkpoint or os.environ.get(MMDET_CHECKPOINT_ENV)
            if not Path(config).is_file():
                raise DetectorUnavailable(f"mmdet config {config!r} not found; point ${MMDET_CONFIG_ENV} at {self.CONFIG}.py")
            if not checkpoint or not Path(checkpoint).is_file():
                raise DetectorUnavailable(
                    f"mmdet checkpoint {checkpoint!r} not found; fetch {self.CONFIG}.pth with GenEval's "
                    f"evaluation/download_models.sh and point ${MMDET_CHECKPOINT_ENV} at it"
                )
            model = init_detector(config, checkpoint, device=str(pick_device(device, default=AUTO)))
        self.model = model

    def detections(self, result, size: tuple[int, int]) -> list[Detection]:
        """mmdet's result for one image -> detections, per class in mmdet's listing order."""
        if isinstance(result, dict) and "ins_results" in result:
            result = result["ins_results"]
        out: list[Detection] = []
        if hasattr(result, "pred_instances"):  # mmdet 3.x DetDataSample
            inst = result.pred_instances
            boxes, scores, labels = (np.asarray(_numpy(getattr(inst, k))) for k in ("bboxes", "scores", "labels"))
            masks = _numpy(inst.masks) if "masks" in inst else None
            for c in range(len(CLASSES)):
                for i in np.nonzero(labels == c)[0]:
                    out.append(self._detection(c, boxes[i], scores[i], None if masks is None else masks[i], size))
            return [d for d in out if d is not None]
        bbox, segm = (result[0], result[1] if len(result) > 1 else None) if isinstance(result, tuple) else (result, None)
        for c in range(len(CLASSES)):
            for j, row in enumerate(np.asarray(bbox[c]).reshape(-1, 5)):
                out.append(self._detection(c, row[:4], row[4], None if segm is None else segm[c][j], size))
        return [d for d in out if d is not None]

    def _detection(self, c: int, box, score, mask, size) -> Detection | None:
        if not float(score) > self.min_score:
            return None
        if mask is not None:
            mask = torch.as_tensor(np.asarray(mask, dtype=bool))
            if tuple(mask.shape) != tuple(size):
                raise JsbenchError(f"mmdet returned a {tuple(mask.shape)} mask for a {tuple(size)} image")
        return Detection(CLASSES[c], tuple(float(v) for v in box), float(np.float32(score)), mask=mask)

    def detect(self, images: torch.Tensor, classes=None) -> list[list[Detection]]:
        out = []
        for image in to_uint8(images).cpu():
            bgr = np.ascontiguousarray(image.permute(1, 2, 0).numpy()[..., ::-1])  # mmdet reads images as cv2 does
            out.append(self.detections(self._inference(self.model, bgr), tuple(image.shape[-2:])))
        return out


def _numpy(x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)

"""Object detectors for GenEval, behind one protocol, and GenEval's CLIP colour classifier.

`Detector.detect(images [B, 3, H, W] in [0, 1], classes) -> list[list[Detection]]`: per image, boxes
in its pixels, a confidence, a class name and (for segmenting detectors) a bool mask. `classes[i]` is
what image i's prompt names (its include and exclude classes): an open-vocabulary detector looks for
those and nothing else, a closed-set detector ignores them. A detector never lets one image's classes
change another image's detections, so a verdict depends on its image and its prompt only. Every
detector has an `id`, recorded with the scores it produced (provenance).

- `mask2former` (default): Mask2Former for COCO instance segmentation from transformers
  (`Mask2FormerForUniversalSegmentation`; default `facebook/mask2former-swin-small-coco-instance`, Swin-S
  trained with Detectron2, not the mmdet weights GenEval uses). Preprocessing and post-processing follow
  the official detector's mmdet test path: the image as the 8-bit PNG GenEval reads, resized to fit
  1333 x 800 keeping its aspect, normalised, padded to a multiple of 32; then per image the 100 best
  (query, class) pairs, masks upsampled to the padded input, cropped, resized to the image and cut at
  logit 0, score = class probability x mean mask probability, box = the mask's bounding box. Labels are
  GenEval's object names by COCO index.
- `mmdet`: the official GenEval detector (mmdet's Mask2Former Swin-S,
  mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco) when mmdet is importable: `init_detector` on the
  config mmdet ships (or $JSBENCH_MMDET_CONFIG) and the checkpoint GenEval downloads
  ($JSBENCH_MMDET_CHECKPOINT), `inference_detector` on the BGR uint8 image; mmdet 2.x (bbox, segm)
  tuples and 3.x data samples are both read.
- `owl`: OWLv2 / OWL-ViT (`AutoModelForZeroShotObjectDetection`), queried with "a photo of a {class}" for
  each class the image's prompt names; OWLv2 pads to a square with grey at the bottom/right, then
  resizes; post-processing is OWL's (sigmoid, boxes scaled to the padded image), but each class on its
  own scores (thresholded per class, so a box may count for two classes), then per-class non-maximum
  suppression (IoU 0.5): a class's verdict does not depend on the other classes queried. No masks.
  Its scores are not Mask2Former's, so the 0.3 /
  0.9 thresholds of GenEval's rules are not calibrated for it: its numbers compare schedules, not
  published tables.
- `geneval-official:FOLDER`: GenEval's own detector weights (mmdet's Mask2Former Swin-S checkpoint, converted
  once by `jsbench detectors convert-mmdet`) on transformers, with mmdet's test path exactly: the image
  resized by OpenCV (bilinear) to fit 1333 x 800, padded with 128 to a multiple of 32, then normalised; the
  100 best (query, class) pairs, post-processed as `mask2former`. The default when
  $JSBENCH_GENEVAL_OFFICIAL names such a folder (and $JSBENCH_GENEVAL_DETECTOR is unset). Converted from
  the checkpoint GenEval publishes (its sha256 says so), its numbers compare with published GenEval tables.
- `world`: the embedded world's exact detector (`jsbench.world.detect.detect`).

Weights come from a local folder or the Hugging Face cache only; a missing model is one line naming it
and how to fetch it.

`ColorClassifier`: GenEval's colour rule. The image as the 8-bit picture GenEval reads; the object's mask
composited over grey #999 (153) with PIL (the whole image when there is no mask); cropped to its box with
PIL's rounding; open_clip's evaluation transform (shortest side to the model's size, bicubic, centre crop);
CLIP ViT-L-14 (openai) with fp32 weights, run under CUDA autocast as GenEval's pinned clip-benchmark 1.4.0
runs it (`amp=False` for pure fp32; on the CPU it is fp32 either way); zero-shot over the ten colours with
GenEval's three templates per colour, template embeddings normalised, averaged and renormalised.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from jsbench import JsbenchError
from jsbench.devices import AUTO, pick_device
from jsbench.scoring.geneval import CLASSES, COLORS, CONFIDENCE, Detection

__all__ = [
    "Detector",
    "DetectorUnavailable",
    "WorldDetector",
    "OwlDetector",
    "Mask2FormerDetector",
    "GenevalOfficialDetector",
    "MMDetDetector",
    "ColorClassifier",
    "load_detector",
    "default_detector_id",
    "detector_id",
    "per_image_classes",
    "mask2bbox",
    "mask2former_postprocess",
    "detector_weights",
    "nms",
    "owl_postprocess",
    "GENEVAL_COLORS",
    "DEFAULT_MASK2FORMER",
    "DEFAULT_OWL",
    "OFFICIAL_DETECTOR_ID",
    "OFFICIAL_COLOR_MODEL",
    "WORLD_ID",
]

DEFAULT_MASK2FORMER = "facebook/mask2former-swin-small-coco-instance"
DEFAULT_OWL = "google/owlv2-base-patch16-ensemble"
MMDET_CONFIG = "mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco"
OFFICIAL_DETECTOR_ID = f"mmdet:{MMDET_CONFIG}"
WORLD_ID = "embedded-exact"
DETECTOR_ENV = "JSBENCH_GENEVAL_DETECTOR"
COLOR_ENV = "JSBENCH_GENEVAL_COLOR_MODEL"
MMDET_CONFIG_ENV = "JSBENCH_MMDET_CONFIG"
MMDET_CHECKPOINT_ENV = "JSBENCH_MMDET_CHECKPOINT"
OFFICIAL_FOLDER_ENV = "JSBENCH_GENEVAL_OFFICIAL"
MMDET_PAD_VALUE = 128  # the official test pipeline pads the 8-bit image with 128 before normalising
GENEVAL_COLORS = COLORS
COLOR_TEMPLATES = ("a photo of a {c} {cls}", "a photo of a {c}-colored {cls}", "a photo of a {c} object")
OFFICIAL_COLOR_MODEL = "ViT-L-14:openai"
GREY = (153, 153, 153)  # GenEval's "#999" crop background
MIN_SCORE = CONFIDENCE  # GenEval keeps detections scoring above 0.3 (0.9 for counting): lower ones never count
NMS_IOU = 0.5
IMAGENET_MEAN_255 = (123.675, 116.28, 103.53)
IMAGENET_STD_255 = (58.395, 57.12, 57.375)


class DetectorUnavailable(JsbenchError):
    """A detector that cannot run here; the message names what is missing and how to get it."""


class Detector(Protocol):
    name: str
    id: str  # provenance: which detector and weights produced the detections

    def detect(self, images: torch.Tensor, classes: Sequence[Sequence[str]] | None = None) -> list[list[Detection]]: ...


def per_image_classes(classes, n: int) -> list[tuple[str, ...] | None]:
    """`classes` as one tuple of class names per image: None, one list for every image, or one list each."""
    if classes is None:
        return [None] * n
    classes = list(classes)
    if all(isinstance(c, str) for c in classes):
        return [tuple(dict.fromkeys(classes))] * n
    if len(classes) != n:
        raise ValueError(f"{len(classes)} class lists for {n} images")
    return [None if c is None else tuple(dict.fromkeys(c)) for c in classes]


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """[B, 3, H, W] in [0, 1] -> the 8-bit values of the PNG a pipeline saves (diffusers rounds x * 255)."""
    return (images.detach().float().clamp(0, 1) * 255).round().to(torch.uint8)


class WorldDetector:
    """The embedded world's exact detector (colour masks + connected components); ignores `classes`."""

    name = "world"
    id = WORLD_ID

    def detect(self, images: torch.Tensor, classes=None) -> list[list[Detection]]:
        from jsbench.world.detect import detect

        return detect(images)


def _local_pretrained(loader, model_id: str, what: str):
    """`loader.from_pretrained(model_id)` from local files only; one line naming the model when absent."""
    try:
        return loader.from_pretrained(model_id, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise DetectorUnavailable(
            f"GenEval detector {model_id!r} ({what}) is not available locally ({type(exc).__name__}); fetch it with "
            f"`hf download {model_id}` or point ${DETECTOR_ENV} / detector= at a local folder"
        ) from None


def _preprocessor_config(model_id: str) -> dict:
    folder = Path(model_id)
    path = folder / "preprocessor_config.json" if folder.is_dir() else None
    if path is None:
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(model_id, "preprocessor_config.json", local_files_only=True))
        except Exception:
            return {}
    return json.loads(path.read_text()) if path.is_file() else {}


# ---------------------------------------------------------------------------------------- Mask2Former


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
        model = _local_pretrained(Mask2FormerForUniversalSegmentation, model_id, "Mask2Former, COCO instance")
        cfg = _preprocessor_config(model_id)
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
        model = _local_pretrained(Mask2FormerForUniversalSegmentation, str(folder), "GenEval's converted mmdet weights")
        return cls(model, folder, provenance, device=device)


def official_provenance(folder: str | Path) -> dict:
    """The `geneval_official.json` a conversion wrote into `folder`; one line when there is none."""
    from jsbench.rewards.mmdet_convert import PROVENANCE_FILE

    path = Path(folder) / PROVENANCE_FILE
    if not path.is_file():
        raise DetectorUnavailable(
            f"{str(folder)!r} holds no {PROVENANCE_FILE}: convert GenEval's checkpoint first "
            "(jsbench detectors convert-mmdet CHECKPOINT FOLDER)"
        )
    return json.loads(path.read_text())


def official_id(provenance: dict) -> str:
    """Provenance id of converted mmdet weights: the source checkpoint's name and sha256 prefix."""
    return f"geneval-official:{provenance.get('source', '?')}@sha256:{str(provenance.get('source_sha256', ''))[:12]}"


def detector_weights(detector: str | None) -> str:
    """Whose weights a recorded detector id ran, in words (for leaderboards); "" for the embedded world."""
    detector = detector or ""
    if detector == OFFICIAL_DETECTOR_ID:
        return "GenEval's official weights (mmdet)"
    if detector.startswith("geneval-official:"):
        from jsbench.rewards.mmdet_convert import is_official_sha256

        if is_official_sha256(detector.rpartition("@sha256:")[2]):
            return "GenEval's official weights, converted from mmdet"
        return "converted mmdet weights, not a checkpoint GenEval publishes"
    if detector == f"mask2former:{DEFAULT_MASK2FORMER}":
        return "Detectron2-trained Mask2Former weights, not GenEval's"
    if detector.startswith("mask2former:"):
        return "transformers Mask2Former weights, not GenEval's"
    if detector.startswith("owl:"):
        return "OWL weights, not GenEval's"
    if detector.startswith(WORLD_ID):
        return ""  # the embedded world's exact detector: no weights
    return "unrecorded weights" if not detector else "other weights, not GenEval's"


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
        model = _local_pretrained(AutoModelForZeroShotObjectDetection, model_id, "OWL")
        tokenizer = _local_pretrained(AutoTokenizer, model_id, "OWL tokenizer")
        cfg = _preprocessor_config(model_id)
        return cls(model, tokenizer, mean=cfg.get("image_mean"), std=cfg.get("image_std"), device=device, model_id=model_id)


# -------------------------------------------------------------------------------------------- loading


def default_detector_id() -> str:
    if os.environ.get(DETECTOR_ENV):
        return os.environ[DETECTOR_ENV]
    if os.environ.get(OFFICIAL_FOLDER_ENV):
        return f"geneval-official:{os.environ[OFFICIAL_FOLDER_ENV]}"
    return "mask2former"


def _parse_spec(spec: str | None) -> tuple[str, str]:
    """(kind, model id) of a detector spec: 'mask2former[:MODEL]', 'owl[:MODEL]', 'mmdet', 'world', or a
    bare model id / local folder (OWL when its name says owl, else Mask2Former)."""
    spec = spec or default_detector_id()
    if spec in ("world", "mmdet"):
        return spec, ""
    kind, sep, model_id = spec.partition(":")
    if kind == "geneval-official":
        if not model_id:
            raise JsbenchError("geneval-official needs the converted folder: geneval-official:FOLDER")
        return kind, model_id
    if sep and kind in ("owl", "mask2former"):
        return kind, model_id or (DEFAULT_OWL if kind == "owl" else DEFAULT_MASK2FORMER)
    if spec in ("owl", "mask2former"):
        return spec, DEFAULT_OWL if spec == "owl" else DEFAULT_MASK2FORMER
    return ("owl" if "owl" in spec.lower() else "mask2former"), spec


def detector_id(spec: str | None = None) -> str:
    """The provenance id `load_detector(spec)` will carry, known without loading any weights."""
    kind, model_id = _parse_spec(spec)
    if kind == "geneval-official":
        return official_id(official_provenance(model_id))
    return {"world": WORLD_ID, "mmdet": OFFICIAL_DETECTOR_ID}.get(kind) or f"{kind}:{model_id}"


def load_detector(name: str | None = None, device=None) -> Detector:
    """'mask2former' (default) or 'mask2former:MODEL', 'owl' or 'owl:MODEL', 'mmdet', 'geneval-official:FOLDER',
    'world', or a model id / local folder (an OWL model when its name says owl, else Mask2Former).
    $JSBENCH_GENEVAL_DETECTOR gives the default, else $JSBENCH_GENEVAL_OFFICIAL (a converted folder)."""
    kind, model_id = _parse_spec(name)
    if kind == "world":
        return WorldDetector()
    if kind == "mmdet":
        return MMDetDetector(device=device)
    if kind == "geneval-official":
        return GenevalOfficialDetector.from_folder(model_id, device=device)
    if kind == "owl":
        return OwlDetector.from_pretrained(model_id, device=device)
    return Mask2FormerDetector.from_pretrained(model_id, device=device)


# ------------------------------------------------------------------------------------------- colour


class ColorClassifier:
    """GenEval's zero-shot colour rule on a `ClipModel` (open_clip ViT-L-14 / openai, fp32, by default)."""

    def __init__(self, clip=None, colors: Sequence[str] = GENEVAL_COLORS, spec: str | None = None, amp: bool = True):
        self._clip = clip
        self.spec = spec or os.environ.get(COLOR_ENV) or OFFICIAL_COLOR_MODEL
        self.colors = tuple(colors)
        self.amp = amp
        self._classifiers: dict[str, torch.Tensor] = {}

    @property
    def id(self) -> str:
        """Provenance: the model and how it runs (fp32 weights; autocast on CUDA as GenEval's pins run it);
        a model passed in is "custom" unless it carries an `id`."""
        if self._clip is not None:
            return str(getattr(self._clip, "id", "custom"))
        return f"{self.spec}/fp32" + ("+cuda-amp" if self.amp else "")

    @property
    def clip(self):
        if self._clip is None:
            from jsbench.rewards.clip import clip_from_spec

            self._clip = clip_from_spec(self.spec, dtype=torch.float32)
        return self._clip

    def _autocast(self):
        device = getattr(self.clip, "device", torch.device("cpu"))
        if self.amp and torch.device(device).type == "cuda":
            return torch.autocast("cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    @torch.no_grad()
    def classifier(self, cls: str) -> torch.Tensor:
        """[n_colours, D]: per colour the mean of its normalised template embeddings, renormalised."""
        if cls not in self._classifiers:
            rows = []
            with self._autocast():
                for c in self.colors:
                    tokens = self.clip.tokenizer([t.format(c=c, cls=cls) for t in COLOR_TEMPLATES]).to(self.clip.device)
                    emb = F.normalize(self.clip.model.encode_text(tokens), dim=-1).mean(0)
                    rows.append(emb / emb.norm())
            self._classifiers[cls] = torch.stack(rows)
        return self._classifiers[cls]

    @staticmethod
    def crops(image: torch.Tensor, boxes: Sequence[Sequence[float]], masks: Sequence | None = None) -> list:
        """PIL crops as GenEval makes them: the 8-bit image, each object's mask composited over grey
        #999 (the whole image when it has no mask), cropped to its box by PIL (coordinates rounded)."""
        from PIL import Image

        picture = Image.fromarray(to_uint8(image[None])[0].permute(1, 2, 0).cpu().numpy(), "RGB")
        blank = Image.new("RGB", picture.size, GREY)
        out = []
        for i, box in enumerate(boxes):
            mask = None if masks is None else masks[i]
            shown = picture
            if mask is not None:
                mask = np.asarray(mask.cpu() if hasattr(mask, "cpu") else mask).astype(bool)
                if mask.shape != picture.size[::-1]:
                    raise ValueError(f"mask {mask.shape} does not match the image {picture.size[::-1]}")
                shown = Image.composite(picture, blank, Image.fromarray(mask))
            out.append(shown.crop(tuple(float(v) for v in box[:4])))
        return out

    def pixels(self, crops: Sequence) -> torch.Tensor:
        """open_clip's evaluation transform on PIL crops: shortest side to the model's size (bicubic),
        centre crop, [0, 1], normalised -> [N, 3, S, S]."""
        from PIL import Image

        size = int(self.clip.image_size)
        mean = torch.as_tensor(self.clip.mean, dtype=torch.float32).flatten().view(3, 1, 1).cpu()
        std = torch.as_tensor(self.clip.std, dtype=torch.float32).flatten().view(3, 1, 1).cpu()
        out = []
        for crop in crops:
            w, h = crop.size
            if w == 0 or h == 0:
                raise ValueError(f"an empty crop ({w}x{h}) has no colour")
            short, long = (w, h) if w <= h else (h, w)
            new_long = int(size * long / short)
            new_w, new_h = (size, new_long) if w <= h else (new_long, size)
            crop = crop.resize((new_w, new_h), Image.BICUBIC)
            top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
            crop = crop.crop((left, top, left + size, top + size)).convert("RGB")
            x = torch.from_numpy(np.asarray(crop, dtype=np.uint8).copy()).permute(2, 0, 1).float() / 255
            out.append((x - mean) / std)
        return torch.stack(out)

    @torch.no_grad()
    def classify(self, image: torch.Tensor, boxes, cls: str, masks=None) -> list[str]:
        """The colour name of each box of one image [3, H, W] (an object of class `cls`)."""
        if len(boxes) == 0:
            return []
        x = self.pixels(self.crops(image, boxes, masks)).to(self.clip.device)
        clf = self.classifier(cls)
        with self._autocast():
            feats = F.normalize(self.clip.model.encode_image(x.to(_model_dtype(self.clip.model))), dim=-1)
            logits = 100.0 * feats @ clf.T.to(feats.dtype)
        return [self.colors[i] for i in logits.float().argmax(-1).tolist()]


def _model_dtype(model) -> torch.dtype:
    p = next(iter(model.parameters()), None) if isinstance(model, torch.nn.Module) else None
    return p.dtype if p is not None else torch.float32

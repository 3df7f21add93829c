"""Object detectors for GenEval behind one protocol: the protocol, the detector specs and ids, and loading.

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
and how to fetch it. The models themselves: jsbench/rewards/mask2former.py (mask2former, geneval-official,
mmdet), jsbench/rewards/owl.py; GenEval's CLIP colour rule: jsbench/rewards/color_classifier.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol, Sequence

import torch

from jsbench import JsbenchError
from jsbench.scoring.geneval import CONFIDENCE, Detection

__all__ = [
    "Detector",
    "DetectorUnavailable",
    "WorldDetector",
    "load_detector",
    "default_detector_id",
    "detector_id",
    "detector_weights",
    "official_provenance",
    "official_id",
    "per_image_classes",
    "to_uint8",
    "local_pretrained",
    "preprocessor_config",
    "DEFAULT_MASK2FORMER",
    "DEFAULT_OWL",
    "OFFICIAL_DETECTOR_ID",
    "WORLD_ID",
]

DEFAULT_MASK2FORMER = "facebook/mask2former-swin-small-coco-instance"
DEFAULT_OWL = "google/owlv2-base-patch16-ensemble"
MMDET_CONFIG = "mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco"
OFFICIAL_DETECTOR_ID = f"mmdet:{MMDET_CONFIG}"
WORLD_ID = "embedded-exact"
DETECTOR_ENV = "JSBENCH_GENEVAL_DETECTOR"
OFFICIAL_FOLDER_ENV = "JSBENCH_GENEVAL_OFFICIAL"
MIN_SCORE = CONFIDENCE  # GenEval keeps detections scoring above 0.3 (0.9 for counting): lower ones never count


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


def local_pretrained(loader, model_id: str, what: str):
    """`loader.from_pretrained(model_id)` from local files only; one line naming the model when absent."""
    try:
        return loader.from_pretrained(model_id, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise DetectorUnavailable(
            f"GenEval detector {model_id!r} ({what}) is not available locally ({type(exc).__name__}); fetch it with "
            f"`hf download {model_id}` or point ${DETECTOR_ENV} / detector= at a local folder"
        ) from None


def preprocessor_config(model_id: str) -> dict:
    folder = Path(model_id)
    path = folder / "preprocessor_config.json" if folder.is_dir() else None
    if path is None:
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(model_id, "preprocessor_config.json", local_files_only=True))
        except Exception:
            return {}
    return json.loads(path.read_text()) if path.is_file() else {}


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
    from jsbench.rewards.mask2former import GenevalOfficialDetector, Mask2FormerDetector, MMDetDetector
    from jsbench.rewards.owl import OwlDetector

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

"""GenEval's scoring rules, applied to detections of one image.

The rules follow GenEval (Ghosh et al., 2023): detections above a confidence threshold (0.3; 0.9 for the
counting task), at most 16 per class, highest confidence first. Every `include` group needs `count`
objects of its class, optionally of a colour and at a position relative to an earlier group; every
`exclude` group fails the image when `count` or more objects of its class are found. Position compares
box centres after subtracting a margin of 0.1 * (w_A + w_B) (and h) from the offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

CONFIDENCE = 0.3
COUNTING_CONFIDENCE = 0.9
MAX_OBJECTS = 16
POSITION_MARGIN = 0.1
TASKS = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
RELATIONS = ("left of", "right of", "above", "below")
# GenEval's object names (its object_names.txt): the 80 COCO classes in COCO's label order, so a closed-set
# COCO detector's label i is CLASSES[i]. Its ten colour names, in the order its colour classifier uses.
CLASSES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "computer mouse", "tv remote",
    "computer keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator",
    "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip
COLORS: tuple[str, ...] = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white")


@dataclass(frozen=True)
class Detection:
    """One detected object: class name, box (x0, y0, x1, y1) in pixels, confidence, colour name or None,
    and the detector's mask (a bool [H, W] tensor of the image) when it has one."""

    label: str
    box: tuple[float, float, float, float]
    confidence: float
    color: str | None = None
    mask: Any = field(default=None, compare=False, repr=False)


def relative_position(box_a: Sequence[float], box_b: Sequence[float]) -> set[str]:
    """Relations of A with respect to B ("left of", ...), factoring in object sizes as GenEval does."""
    a = np.asarray(box_a, dtype=np.float64).reshape(2, 2)
    b = np.asarray(box_b, dtype=np.float64).reshape(2, 2)
    centre_a, centre_b = a.mean(0), b.mean(0)
    dim_a, dim_b = np.abs(a[1] - a[0]), np.abs(b[1] - b[0])
    offset = centre_a - centre_b
    revised = np.maximum(np.abs(offset) - POSITION_MARGIN * (dim_a + dim_b), 0.0) * np.sign(offset)
    if np.all(np.abs(revised) < 1e-3):
        return set()
    dx, dy = revised / np.linalg.norm(offset)
    relations = set()
    if dx < -0.5:
        relations.add("left of")
    if dx > 0.5:
        relations.add("right of")
    if dy < -0.5:
        relations.add("above")
    if dy > 0.5:
        relations.add("below")
    return relations


def group_detections(detections: Sequence[Detection], tag: str) -> dict[str, list[Detection]]:
    """Per class, the detections above the task's threshold, most confident first, at most 16.

    The order is GenEval's: numpy's argsort of the class's confidences (float32, in the order the
    detector listed them), reversed, so of two equal confidences the later-listed detection comes first."""
    threshold = COUNTING_CONFIDENCE if tag == "counting" else CONFIDENCE
    listed: dict[str, list[Detection]] = {}
    for det in detections:
        listed.setdefault(det.label, []).append(det)
    by_class: dict[str, list[Detection]] = {}
    for name, dets in listed.items():
        scores = np.asarray([d.confidence for d in dets], dtype=np.float32)
        kept = [dets[i] for i in np.argsort(scores)[::-1] if scores[i] > threshold][:MAX_OBJECTS]
        if kept:
            by_class[name] = kept
    return by_class


def evaluate_detections(detections: Sequence[Detection], metadata: dict) -> tuple[bool, str]:
    """(correct, reason) for one image under one GenEval metadata entry."""
    objects = group_detections(detections, metadata.get("tag", ""))
    correct = True
    reasons: list[str] = []
    matched_groups: list[list[Detection] | None] = []
    for req in metadata.get("include", []):
        name, count = req["class"], int(req["count"])
        found = objects.get(name, [])[:count]
        matched = True
        if len(found) < count:
            correct = matched = False
            reasons.append(f"expected {name}>={count}, found {len(found)}")
        else:
            if "color" in req:
                colors = [d.color for d in found]
                if colors.count(req["color"]) < count:
                    correct = matched = False
                    reasons.append(f"expected {req['color']} {name}>={count}, found {colors}")
            if "position" in req and matched:
                relation, target = req["position"]
                targets = matched_groups[target] if target < len(matched_groups) else None
                if targets is None:
                    correct = matched = False
                    reasons.append(f"no target for {name} to be {relation}")
                else:
                    for obj in found:
                        if any(relation not in relative_position(obj.box, tgt.box) for tgt in targets):
                            correct = matched = False
                            reasons.append(f"expected {name} {relation} target")
                            break
        matched_groups.append(found if matched else None)
    for req in metadata.get("exclude", []):
        name, count = req["class"], int(req["count"])
        if len(objects.get(name, [])) >= count:
            correct = False
            reasons.append(f"expected {name}<{count}, found {len(objects[name])}")
    return correct, "; ".join(reasons)

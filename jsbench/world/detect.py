"""The scene world's exact detector: colour masks and connected components on a rendered image.

It plays the part GenEval gives Mask2Former + CLIP: it sees only pixels. Foreground is what differs
from the grey background; each connected component (holes filled, so a ring is one object) is one
detection. Colour and opacity come from fitting `background + alpha * (palette colour - background)`
to the component's interior, the confidence is that alpha (a faint ghost is a low-confidence
detection), and the class comes from the component's geometry: a hole makes a ring, otherwise the share
of its box that it fills separates triangles (~0.5), circles (~0.79) and squares (~1).
"""

from __future__ import annotations

import numpy as np
import torch

from jsbench.scoring.geneval import Detection
from jsbench.world.scenes import BACKGROUND, COLOR_ANCHORS, COLOR_RGB, COLORS

FOREGROUND_THRESHOLD = 0.08
MIN_AREA = 8
MIN_HOLE = 4
SQUARE_FILL = 0.89
CIRCLE_FILL = 0.64

_PALETTE_LINE_C = np.linspace(COLOR_ANCHORS[0], COLOR_ANCHORS[-1], 20 * (len(COLORS) - 1) + 1)
_PALETTE_LINE_RGB = np.stack([np.interp(_PALETTE_LINE_C, COLOR_ANCHORS, COLOR_RGB[:, ch]) for ch in range(3)], -1)

# connect pixels within one image only (never across the batch axis), 8-neighbourhood
_PLANE = np.zeros((3, 3, 3), dtype=bool)
_PLANE[1] = True
_PLANE_CROSS = np.zeros((3, 3, 3), dtype=bool)
_PLANE_CROSS[1] = [[False, True, False], [True, True, True], [False, True, False]]  # 4-neighbourhood


def detect(images: torch.Tensor) -> list[list[Detection]]:
    """Detections for each image of a [B, 3, H, W] batch in [0, 1]."""
    from scipy import ndimage  # here, not at import: the GPU image has no scipy and never calls the detector

    pix = images.detach().to(torch.float32).cpu().permute(0, 2, 3, 1).numpy()
    batch = pix.shape[0]
    background = np.asarray(BACKGROUND, dtype=np.float32)
    contrast = np.abs(pix - background).max(-1)
    fg = contrast > FOREGROUND_THRESHOLD
    filled = ndimage.binary_fill_holes(fg, structure=_PLANE_CROSS)
    labels, count = ndimage.label(filled, structure=_PLANE)
    out: list[list[Detection]] = [[] for _ in range(batch)]
    if count == 0:
        return out
    index = np.arange(1, count + 1)
    area_filled = ndimage.sum_labels(np.ones_like(fg), labels, index)
    area_fg = ndimage.sum_labels(fg, labels, index)
    # geometry is measured on the half-maximum iso-line of each component, where the anti-aliased
    # edge crosses the true shape boundary, so a faint or dark object has the same shape as a bright one
    peak = ndimage.maximum(contrast, labels, index)
    half = fg & (contrast >= 0.5 * np.concatenate([[0.0], peak])[labels])
    half_labels = np.where(half, labels, 0)
    area_half = ndimage.sum_labels(half, labels, index)
    half_boxes = ndimage.find_objects(half_labels, max_label=count)
    # interior pixels carry the full colour (edges are anti-aliased): erode once, fall back to all
    core = ndimage.binary_erosion(fg, structure=_PLANE_CROSS)
    core_labels = np.where(core, labels, 0)
    core_area = ndimage.sum_labels(core, labels, index)
    mean_rgb = np.empty((count, 3), dtype=np.float64)
    for ch in range(3):
        full = ndimage.mean(pix[..., ch], labels, index)
        with np.errstate(invalid="ignore", divide="ignore"):  # components with no interior: use `full`
            inner = ndimage.mean(pix[..., ch], core_labels, index) if core.any() else full
        mean_rgb[:, ch] = np.where(core_area > 0, inner, full)
    # invert the renderer's colour model: background + alpha * (palette line at c - background), with c
    # searched densely along the palette line, so a slightly off-anchor hue does not read as faint
    offsets = _PALETTE_LINE_RGB - background  # [L, 3]
    seen = mean_rgb - background  # [n, 3]
    alpha = np.clip(seen @ offsets.T / (offsets**2).sum(-1), 0.0, 1.0)  # [n, L]
    resid = ((seen[:, None, :] - alpha[..., None] * offsets[None]) ** 2).sum(-1)
    best = resid.argmin(-1)
    confidence = alpha[np.arange(count), best]
    color_index = np.abs(_PALETTE_LINE_C[best, None] - COLOR_ANCHORS[None, :]).argmin(-1)
    for i, sl in enumerate(ndimage.find_objects(labels)):
        if sl is None or area_filled[i] < MIN_AREA:
            continue
        b, ys, xs = half_boxes[i] if half_boxes[i] is not None else sl
        box = (float(xs.start), float(ys.start), float(xs.stop), float(ys.stop))
        fill = area_half[i] / float((xs.stop - xs.start) * (ys.stop - ys.start))
        if area_filled[i] - area_fg[i] >= MIN_HOLE:
            label = "ring"
        elif fill >= SQUARE_FILL:
            label = "square"
        elif fill >= CIRCLE_FILL:
            label = "circle"
        else:
            label = "triangle"
        out[b.start].append(Detection(label=label, box=box, confidence=float(confidence[i]), color=COLORS[color_index[i]]))
    return out

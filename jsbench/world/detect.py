"""The scene world's exact detector: colour masks and connected components on a rendered image.

It plays the part GenEval gives Mask2Former + CLIP: it sees only pixels. Foreground is what differs
from the grey background; each connected component (holes filled, so a ring is one object) is one
detection. Colour and opacity come from fitting `background + alpha * (palette colour - background)`
to the component's interior, the confidence is that alpha (a faint ghost is a low-confidence
detection), and the class comes from the component's geometry: a hole makes a ring, otherwise the share
of its box that it fills separates triangles (~0.5), circles (~0.79) and squares (~1).
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class PixelMaps:
    """What the detectors read off a [B, 3, H, W] batch, computed once and shared: the pixels [B, H, W, 3],
    each pixel's largest channel difference from the background `contrast` [B, H, W], the `foreground`
    (contrast above FOREGROUND_THRESHOLD) and its `interior`, the foreground pixels whose four neighbours
    are foreground too (where a component's colour is unblended, and where the detail world draws stripes)."""

    pix: np.ndarray
    contrast: np.ndarray
    foreground: np.ndarray
    interior: np.ndarray


def pixel_maps(images: torch.Tensor) -> PixelMaps:
    pix = images.detach().to(torch.float32).cpu().permute(0, 2, 3, 1).numpy()
    contrast = np.abs(pix - np.asarray(BACKGROUND, dtype=np.float32)).max(-1)
    fg = contrast > FOREGROUND_THRESHOLD
    return PixelMaps(pix=pix, contrast=contrast, foreground=fg, interior=erode_in_plane(fg))


def erode_in_plane(mask: np.ndarray) -> np.ndarray:
    """Binary erosion of a [B, H, W] mask by the 4-neighbourhood within each image, outside the image counting
    as background: `ndimage.binary_erosion(mask, structure=_PLANE_CROSS)`, as four shifted ANDs."""
    out = mask.copy()
    out[:, 1:, :] &= mask[:, :-1, :]
    out[:, :-1, :] &= mask[:, 1:, :]
    out[:, :, 1:] &= mask[:, :, :-1]
    out[:, :, :-1] &= mask[:, :, 1:]
    out[:, 0, :] = out[:, -1, :] = False
    out[:, :, 0] = out[:, :, -1] = False
    return out


def fill_holes_in_plane(mask: np.ndarray) -> np.ndarray:
    """`ndimage.binary_fill_holes(mask, structure=_PLANE_CROSS)` of a [B, H, W] mask: the pixels not reached
    from an image's edge through 4-connected background. One labelling of the background replaces the
    iterated dilation scipy runs."""
    from scipy import ndimage

    background, _ = ndimage.label(~mask, structure=_PLANE_CROSS)
    edge = np.concatenate([background[:, 0, :], background[:, -1, :], background[:, :, 0], background[:, :, -1]], axis=1)
    outside = np.zeros(int(background.max()) + 1, dtype=bool)
    outside[edge.ravel()] = True
    outside[0] = False  # label 0 is the mask itself, never outside
    return ~outside[background]


class _LabelSums:
    """Per-component sums over labels 1..count of a [B, H, W] labelling: what `ndimage.sum_labels` and
    `ndimage.mean` compute with one np.bincount, in the same order of additions (each label's pixels in
    raster order), but over the labelled pixels only (a small share of these images) and without scipy's
    checks and remapping, which cost more than the sums here."""

    def __init__(self, labels: np.ndarray, count: int):
        self.count = count
        self._where = np.flatnonzero(labels)
        self._labels = labels.ravel()[self._where]

    def areas(self, mask: np.ndarray | None = None) -> np.ndarray:
        """[count] float64: each component's pixels (within `mask`), as exact as scipy's sums of ones."""
        labels = self._labels if mask is None else self._labels[mask.ravel()[self._where]]
        return np.bincount(labels, minlength=self.count + 1)[1:].astype(np.float64)

    def maxima(self, values: np.ndarray) -> np.ndarray:
        """[count]: each component's largest value, in `values`' dtype (a maximum is exact in any order)."""
        out = np.full(self.count + 1, -np.inf, dtype=values.dtype)
        np.maximum.at(out, self._labels, values.ravel()[self._where])
        return out[1:]

    def sums(self, values: np.ndarray) -> np.ndarray:
        """[count] float64: each component's sum of `values`, added in raster order as np.bincount adds them."""
        return np.bincount(self._labels, weights=values.ravel()[self._where].astype(np.float64), minlength=self.count + 1)[1:]


def detect(images: torch.Tensor, maps: PixelMaps | None = None) -> list[list[Detection]]:
    """Detections for each image of a [B, 3, H, W] batch in [0, 1] (`maps`: its `pixel_maps`, if already made)."""
    from scipy import ndimage  # here, not at import: the GPU image has no scipy and never calls the detector

    maps = maps or pixel_maps(images)
    pix, contrast, fg, core = maps.pix, maps.contrast, maps.foreground, maps.interior
    batch = pix.shape[0]
    background = np.asarray(BACKGROUND, dtype=np.float32)
    filled = fill_holes_in_plane(fg)
    labels, count = ndimage.label(filled, structure=_PLANE)
    out: list[list[Detection]] = [[] for _ in range(batch)]
    if count == 0:
        return out
    components = _LabelSums(labels, count)
    area_filled = components.areas()
    area_fg = components.areas(fg)
    # geometry is measured on the half-maximum iso-line of each component, where the anti-aliased
    # edge crosses the true shape boundary, so a faint or dark object has the same shape as a bright one
    peak = np.concatenate([[0.0], components.maxima(contrast)])  # float64, as scipy's float32 maxima become here
    half = fg & (contrast >= 0.5 * peak[labels])
    half_labels = np.where(half, labels, 0)
    area_half = components.areas(half)
    half_boxes = ndimage.find_objects(half_labels, max_label=count)
    # interior pixels carry the full colour (edges are anti-aliased): erode once, fall back to all
    core_labels = np.where(core, labels, 0)
    core_components = _LabelSums(core_labels, count)
    core_area = core_components.areas()
    mean_rgb = np.empty((count, 3), dtype=np.float64)
    for ch in range(3):
        channel = pix[..., ch]
        with np.errstate(invalid="ignore", divide="ignore"):  # components with no interior: use `full`
            full = components.sums(channel) / area_filled
            inner = core_components.sums(channel) / core_area if core.any() else full
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

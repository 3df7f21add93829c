"""The scene world's decoder: slot latents -> RGB images, deterministic and differentiable-free.

Each slot is drawn as an anti-aliased signed-distance shape, composited in slot order over a grey
background. Presence sets opacity (half-present = a faint ghost), the colour coordinate interpolates
the palette (between anchors = an off-palette colour), the shape coordinate interpolates the distance
fields of neighbouring classes (between anchors = a shape between two classes).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from jsbench.world.scenes import (
    BACKGROUND,
    CANVAS,
    CLASSES,
    COLOR_ANCHORS,
    COLOR_RGB,
    PX_PER_UNIT,
    SHAPE_ANCHORS,
    SHAPES,
    SLOT_DIM,
    SLOTS,
)

_SQRT3_2 = 0.8660254


def _hat_weights(value: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Piecewise-linear interpolation weights [B, A] of value [B] over sorted, evenly spaced anchors."""
    spacing = anchors[1] - anchors[0]
    pos = ((value - anchors[0]) / spacing).clamp(0, len(anchors) - 1)
    return (1.0 - (pos[:, None] - torch.arange(len(anchors), dtype=value.dtype, device=value.device)).abs()).clamp(min=0)


def _shape_sdfs(dx: torch.Tensor, dy: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Signed distances [B, 4, H, W] to a triangle, circle, square and ring of size r, in shape order."""
    r = r[:, None, None]
    dist = torch.sqrt(dx * dx + dy * dy)
    outer = 1.25 * r  # triangle circumradius; its inradius is half of it
    tri = torch.maximum(torch.maximum(dy, -_SQRT3_2 * dx - 0.5 * dy), _SQRT3_2 * dx - 0.5 * dy) - 0.5 * outer
    circle = dist - r
    square = torch.maximum(dx.abs(), dy.abs()) - 0.9 * r
    ring = (dist - 0.8 * r).abs() - 0.35 * r
    return torch.stack([tri, circle, square, ring], dim=1)


@lru_cache(maxsize=8)
def _pixel_centres(canvas: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(py, px) [canvas, canvas]: every pixel's centre, made once per canvas (read, never written)."""
    coords = torch.arange(canvas, dtype=torch.float32) + 0.5
    return tuple(torch.meshgrid(coords, coords, indexing="ij"))


def _reach(radius: float) -> float:
    """How far (px) from its centre a shape of size <= `radius` can cover a pixel. Each distance field is at
    least a linear function of the distance d from the centre: triangle d/2 - 0.625 r (its three edge normals
    are 120 degrees apart), circle d - r, square d/sqrt(2) - 0.9 r, ring d - 1.15 r; a blend of two shapes is
    at least the same blend of these, so it reaches no farther than the farther of the two. A pixel is covered
    only where the field is below 1/2 (`render_scenes`); the triangle reaches farthest, to 1 + 1.25 r."""
    return 1.0 + 1.25 * radius


def render_scenes(latents: torch.Tensor, canvas: int = CANVAS) -> torch.Tensor:
    """[B, D] scene latents -> [B, 3, canvas, canvas] images in [0, 1]."""
    latents = latents.detach().to(torch.float32).cpu()
    batch = latents.shape[0]
    py, px = _pixel_centres(canvas)
    color_anchors = torch.tensor(COLOR_ANCHORS, dtype=torch.float32)
    palette = torch.tensor(COLOR_RGB, dtype=torch.float32)
    shape_anchors = torch.tensor(SHAPE_ANCHORS, dtype=torch.float32)
    radii = torch.tensor([CLASSES[s].radius for s in SHAPES], dtype=torch.float32)
    image = torch.tensor(BACKGROUND, dtype=torch.float32)[None, :, None, None].expand(batch, 3, canvas, canvas).clone()
    scale = canvas / CANVAS
    # a shape covers nothing beyond its reach, where the image stays exactly as it is (x * (1 - 0) + rgb * 0
    # == x): each object is drawn in a square window around its centre, with the very pixel coordinates and
    # arithmetic of the whole canvas, so the image is the same, bit for bit, for a fraction of the pixels
    half = math.ceil(_reach(float(radii.max()) * scale)) + 1
    window = 2 * half + 1
    for slot in range(SLOTS):
        presence, x, y, color, shape = latents[:, slot * SLOT_DIM : (slot + 1) * SLOT_DIM].unbind(-1)
        # opacity saturates a little before presence reaches its mode at +1, so the data's own jitter
        # draws solid objects, while a slot stranded at presence 0 is a half-transparent ghost
        alpha = (0.5 + 1.25 * presence).clamp(0.0, 1.0)
        rgb = _hat_weights(color, color_anchors) @ palette  # [B, 3]
        shape_w = _hat_weights(shape, shape_anchors)  # [B, 4]
        radius = (shape_w @ radii) * scale
        cx = (canvas / 2 + scale * PX_PER_UNIT * x)[:, None, None]
        cy = (canvas / 2 + scale * PX_PER_UNIT * y)[:, None, None]
        # a slot at zero opacity (an absent object) covers nothing and leaves its rows exactly as they are,
        # so only the rows it shows in are drawn
        shown = (alpha != 0).nonzero().squeeze(1)  # NaN too: a broken latent must still show as broken
        if len(shown) == 0:
            continue
        if len(shown) < batch:
            alpha, rgb, shape_w, radius, cx, cy = (v[shown] for v in (alpha, rgb, shape_w, radius, cx, cy))
        finite = all(bool(torch.isfinite(v).all()) for v in (alpha, rgb, shape_w, radius, cx, cy))
        if window < canvas and finite:
            _draw_in_windows(image, shown, alpha, rgb, shape_w, radius, cx, cy, canvas, window, half)
            continue
        sdf = (shape_w[:, :, None, None] * _shape_sdfs(px - cx, py - cy, radius)).sum(1)
        cover = (alpha[:, None, None] * (0.5 - sdf).clamp(0.0, 1.0))[:, None]  # anti-aliased 1 px edge
        if len(shown) < batch:
            image[shown] = image[shown] * (1.0 - cover) + rgb[:, :, None, None] * cover
        else:
            image = image * (1.0 - cover) + rgb[:, :, None, None] * cover
    return image


def _draw_in_windows(image, shown, alpha, rgb, shape_w, radius, cx, cy, canvas: int, window: int, half: int) -> None:
    """Composite one slot's shapes onto rows `shown` of `image`, in place, computing only the `window` x
    `window` pixels around each shape's centre (clamped into the canvas), as `render_scenes` draws them."""
    offsets = torch.arange(window)
    x0 = (cx.flatten().floor() - half).clamp(0, canvas - window).long()  # [n] first column of each window
    y0 = (cy.flatten().floor() - half).clamp(0, canvas - window).long()
    cols, rows = x0[:, None] + offsets, y0[:, None] + offsets  # [n, window] pixel indices
    px = (cols.to(torch.float32) + 0.5)[:, None, :]  # [n, 1, window]: the canvas's own pixel centres
    py = (rows.to(torch.float32) + 0.5)[:, :, None]  # [n, window, 1]
    sdf = (shape_w[:, :, None, None] * _shape_sdfs(px - cx, py - cy, radius)).sum(1)  # [n, window, window]
    cover = (alpha[:, None, None] * (0.5 - sdf).clamp(0.0, 1.0)).flatten(1)[:, None]  # [n, 1, window^2]
    pixels = (rows[:, :, None] * canvas + cols[:, None, :]).flatten(1)  # [n, window^2] into the flat canvas
    flat = image.view(image.shape[0], 3, canvas * canvas)
    index = (shown[:, None, None], torch.arange(3)[None, :, None], pixels[:, None, :])
    flat[index] = flat[index] * (1.0 - cover) + rgb[:, :, None] * cover

"""The text world's canvas: the latent's layout and glyph anchors, the font, and the decoder that draws a
text latent as an image (`render_text`). jsbench/world/text.py describes the latent and builds the prompts'
mixtures on these anchors.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.world.scenes import LATENT_DIM

__all__ = ["TextWorldError", "TEXT_HEIGHT", "TEXT_WIDTH", "MAX_TEXT_CHARS", "render_text"]


class TextWorldError(JsbenchError):
    pass


# ------------------------------------------------------------------------------------------ the canvas

TEXT_HEIGHT, TEXT_WIDTH = 64, 256
BACKGROUND = (0.95, 0.93, 0.87)  # paper
INK = (0.08, 0.08, 0.10)
MARGIN = 4.0  # px kept free at the left/right edge for every mode, jitter included

X_DIM, Y_DIM, SIZE_DIM, WEIGHT_DIM, GLYPH_DIM0 = 0, 1, 2, 3, 4
CELLS = LATENT_DIM - GLYPH_DIM0  # 20 glyph cells
MAX_TEXT_CHARS = 16  # what fits on the canvas at the smallest size, centred, with jitter

PLATEAU = 0.2  # share of an anchor step, on each side of an anchor, drawn as one clean copy
GHOST_GAMMA = 0.7  # opacity of a crossfaded copy = weight ** GHOST_GAMMA

X_STEP, PX_PER_X = 0.6, 40.0  # 24 px between horizontal anchors
X_ANCHORS = X_STEP * np.arange(-3, 4, dtype=np.float64)  # 7 positions, index 3 = centred
Y_STEP, PX_PER_Y = 0.6, 16.0  # ~10 px between baselines (2/3 of an x-height at 28 px)
Y_ANCHORS = Y_STEP * np.arange(-1, 2, dtype=np.float64)  # 3 baselines, index 1 = centred
SIZE_STEP = 0.6
SIZE_ANCHORS = SIZE_STEP * np.arange(-1, 2, dtype=np.float64)
FONT_SIZES = (22, 28, 34)
WEIGHT_STEP = 1.0
WEIGHT_ANCHORS = WEIGHT_STEP * np.array([-0.5, 0.5])
FONT_FILES = ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf")

LETTERS = "abcdefghijklmnopqrstuvwxyz"
BLANKS = 4  # the line starts with blank anchors, so a blank cell's jitter never reaches a glyph
GLYPHS = " " * BLANKS + "-'.,:!?&" + "0123456789" + "".join(c + c.upper() for c in LETTERS)
GLYPH_STEP = 0.5  # a case change moves each letter's code by one step
GLYPH_ANCHORS = GLYPH_STEP * (np.arange(len(GLYPHS), dtype=np.float64) - (len(GLYPHS) - 1) / 2)
BLANK = 0  # the blank code; indices below BLANKS draw nothing
GLYPH_INDEX = {g: i for i, g in enumerate(GLYPHS) if i >= BLANKS}
GLYPH_INDEX[" "] = BLANK
WORD_GAP = 2  # blank cells between words (OCR engines merge words one monospace cell apart)
SUPPORTED_CHARS = set(GLYPHS) | set(LETTERS.upper())


# ----------------------------------------------------------------------------------------- the fonts


def _font_dir() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


@lru_cache(maxsize=None)
def _font(size_index: int, weight_index: int):
    from PIL import ImageFont

    path = _font_dir() / FONT_FILES[weight_index]
    try:
        return ImageFont.truetype(str(path), FONT_SIZES[size_index])
    except OSError:
        raise TextWorldError(f"the text world needs matplotlib's bundled font {path}; reinstall matplotlib") from None


@lru_cache(maxsize=None)
def font_advance(size_index: int) -> float:
    return float(_font(size_index, 0).getlength("M"))


@lru_cache(maxsize=None)
def glyph_extent(size_index: int) -> tuple[float, float]:
    """(top, bottom) of every drawable glyph relative to the baseline, in px (top < 0)."""
    tops, bottoms = [], []
    for w in range(len(FONT_FILES)):
        _, top, _, bottom = _font(size_index, w).getbbox(GLYPHS[BLANKS:], anchor="ls")
        tops.append(top)
        bottoms.append(bottom)
    return float(min(tops)), float(max(bottoms))


@lru_cache(maxsize=None)
def _glyph(glyph_index: int, size_index: int, weight_index: int) -> tuple[np.ndarray, int, int]:
    """A glyph's coverage bitmap [h, w] in [0, 1] and its top-left offset from the pen (left, baseline)."""
    from PIL import Image, ImageDraw

    char = GLYPHS[glyph_index]
    font = _font(size_index, weight_index)
    left, top, right, bottom = font.getbbox(char, anchor="ls")
    if right <= left or bottom <= top:
        return np.zeros((0, 0), dtype=np.float32), 0, 0
    img = Image.new("L", (right - left, bottom - top), 0)
    ImageDraw.Draw(img).text((-left, -top), char, font=font, fill=255, anchor="ls")
    return np.asarray(img, dtype=np.float32) / 255.0, int(left), int(top)


def centred_baseline(size_index: int) -> float:
    """Baseline (px) of the centred anchor for a font size: caps and x-height centred on the canvas."""
    return TEXT_HEIGHT / 2 + 0.36 * FONT_SIZES[size_index]


# ---------------------------------------------------------------------------------------- the decoder


def _crossfade(values: np.ndarray, anchors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For values [B] on a uniform anchor line: the lower anchor index k0 and the weight of k0 + 1.

    Within PLATEAU of a step from an anchor the weight is all on that anchor; between, it moves
    linearly to the neighbour, so a value halfway between two anchors draws both (see `_copies`).
    """
    step = anchors[1] - anchors[0]
    u = np.clip((values - anchors[0]) / step, 0.0, len(anchors) - 1)
    k0 = np.minimum(np.floor(u), len(anchors) - 2).astype(np.int64)
    frac = u - k0
    w1 = np.clip((frac - PLATEAU) / (1.0 - 2.0 * PLATEAU), 0.0, 1.0)
    return k0, w1


def _copies(k0: int, w1: float, min_weight: float = 1e-3) -> list[tuple[int, float]]:
    """The (anchor, opacity) copies a crossfade draws: opacity is weight ** GHOST_GAMMA, so a sample
    between two modes shows both copies strongly, as a sharp few-step sample with two modes in it does."""
    out = []
    if 1.0 - w1 > min_weight:
        out.append((k0, (1.0 - w1) ** GHOST_GAMMA))
    if w1 > min_weight:
        out.append((k0 + 1, w1**GHOST_GAMMA))
    return out


def _paste(acc: np.ndarray, bitmap: np.ndarray, x0: int, y0: int, alpha: float) -> None:
    h, w = bitmap.shape
    if h == 0:
        return
    H, W = acc.shape
    xa, ya, xb, yb = max(x0, 0), max(y0, 0), min(x0 + w, W), min(y0 + h, H)
    if xa >= xb or ya >= yb:
        return
    acc[ya:yb, xa:xb] += alpha * bitmap[ya - y0 : yb - y0, xa - x0 : xb - x0]


def render_text(latents: torch.Tensor, prompts: Sequence[str] | None = None) -> torch.Tensor:
    """[B, 24] text latents -> [B, 3, 64, 256] images in [0, 1].

    The decoder reads only the latent (as a real VAE decoder would): the characters come from the
    glyph cells, so `prompts` is accepted for symmetry with the scene renderer and only checked for
    length.
    """
    if latents.dim() != 2 or latents.shape[1] != LATENT_DIM:
        raise ValueError(f"text latents must be [B, {LATENT_DIM}], got {tuple(latents.shape)}")
    if prompts is not None and len(prompts) != latents.shape[0]:
        raise ValueError(f"{len(prompts)} prompts for {latents.shape[0]} latents")
    lat = latents.detach().to(torch.float64).cpu().numpy()
    batch = lat.shape[0]
    x_k, x_w = _crossfade(lat[:, X_DIM], X_ANCHORS)
    y_k, y_w = _crossfade(lat[:, Y_DIM], Y_ANCHORS)
    s_k, s_w = _crossfade(lat[:, SIZE_DIM], SIZE_ANCHORS)
    b_k, b_w = _crossfade(lat[:, WEIGHT_DIM], WEIGHT_ANCHORS)
    g_k, g_w = _crossfade(lat[:, GLYPH_DIM0:].reshape(-1), GLYPH_ANCHORS)
    g_k, g_w = g_k.reshape(batch, CELLS), g_w.reshape(batch, CELLS)
    jx, jy = PLATEAU * X_STEP, PLATEAU * Y_STEP
    coverage = np.zeros((batch, TEXT_HEIGHT, TEXT_WIDTH), dtype=np.float32)
    for b in range(batch):
        acc = coverage[b]
        # per cell, its glyphs with weights (blank draws nothing); the text runs to the last cell that
        # is more glyph than blank, and is centred on the x position
        cells = []
        last = -1
        for c in range(CELLS):
            glyphs = [(g, w) for g, w in _copies(int(g_k[b, c]), float(g_w[b, c])) if g >= BLANKS]
            if max((w for _, w in glyphs), default=0.0) >= 0.5 ** GHOST_GAMMA:
                last = c
            cells.append(glyphs)
        n_chars = last + 1
        xs = [
            (TEXT_WIDTH / 2 + PX_PER_X * (X_ANCHORS[k] + np.clip(lat[b, X_DIM] - X_ANCHORS[k], -jx, jx)), w)
            for k, w in _copies(int(x_k[b]), float(x_w[b]))
        ]
        ys = [(PX_PER_Y * (Y_ANCHORS[k] + np.clip(lat[b, Y_DIM] - Y_ANCHORS[k], -jy, jy)), w) for k, w in _copies(int(y_k[b]), float(y_w[b]))]
        for s, ws in _copies(int(s_k[b]), float(s_w[b])):
            adv = font_advance(s)
            for dy, wy in ys:
                baseline = centred_baseline(s) + dy
                for bw, wb in _copies(int(b_k[b]), float(b_w[b])):
                    for cx, wx in xs:
                        weight = ws * wy * wb * wx
                        if weight < 1e-3:
                            continue
                        left = cx - n_chars * adv / 2
                        for c, glyphs in enumerate(cells):
                            for g, wg in glyphs:
                                bitmap, ox, oy = _glyph(g, s, bw)
                                _paste(acc, bitmap, int(round(left + c * adv + ox)), int(round(baseline + oy)), weight * wg)
    cover = torch.from_numpy(np.clip(coverage, 0.0, 1.0))[:, None]
    bg = torch.tensor(BACKGROUND, dtype=torch.float32)[None, :, None, None]
    ink = torch.tensor(INK, dtype=torch.float32)[None, :, None, None]
    return bg * (1.0 - cover) + ink * cover

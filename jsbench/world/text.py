"""The embedded world's text scenes: prompts with quoted text, their data distribution, a font renderer.

A text prompt (`a sign that says "river"`) asks for its quoted words drawn in a real font (matplotlib's
bundled DejaVu Sans Mono). Its data distribution is a Gaussian mixture over the SAME 24-dim latent as
the scene world, so `MixtureTable` / `euler_flow` sample it exactly. The latent of a text scene is

    dim 0  x       horizontal position of the text centre      anchors every X_STEP
    dim 1  y       baseline offset                             anchors every Y_STEP
    dim 2  size    font size (22 / 28 / 34 px)                 anchors every SIZE_STEP
    dim 3  weight  regular / bold                              anchors every WEIGHT_STEP
    dims 4..23     one glyph code per character cell (20 cells), on a line of glyph anchors: four
                   blanks, then -'.,:!?& and 0..9, then the letters with each lower and upper case as
                   neighbours (aAbB..zZ); words are two blank cells apart

A prompt's modes are the layouts its carrier word allows (a neon sign: three baselines and three sizes;
a billboard: five positions, ...) times its case styles (lower, UPPER, Title), one component each.
The decoder draws a latent between anchors the way an image-space average of the neighbouring modes
looks: two ghosted copies of the text at two positions, baselines or sizes, and overlapping glyphs
where a character cell sits between two glyphs (between `e` and `E`, for example). Close to an anchor
(within PLATEAU of a step) the text is drawn once and clean, and position jitter moves it, so the data's
own spread never garbles a word (glyph cells also get a tight spread of their own). Few-step sampling
ends between modes and OCR misreads the ghosts; the many-step ceiling lands on modes and reads
correctly. Measured with rapidocr, uniform Euler steps, 100 generated prompts x 4 seeds: word accuracy
1.000 at 200 steps, 0.733 at 5, 0.533 at 3 (tesseract: 0.998 / 0.775 / 0.588).

What differs between prompts, and so what makes the best schedule differ, is tied to the prompt's words
as a real model ties it to its text: the carrier word sets the layout modes and the spread, the length of
the text sets how far apart the case modes are (a case change moves every letter's glyph code) and which
positions fit on the canvas. A policy sees only `embed_text_prompt`, a bag of such word features.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.io import read_prompt_lines
from jsbench.scoring.text import quoted_spans
from jsbench.splits import check_split, hashed_order, held_out_positions, sha256_digest
from jsbench.world.mixture import PromptMixture
from jsbench.world.scenes import LATENT_DIM

__all__ = [
    "TextWorldError",
    "TextSpec",
    "TEXT_HEIGHT",
    "TEXT_WIDTH",
    "MAX_TEXT_CHARS",
    "WORDS",
    "CARRIERS",
    "is_text_prompt",
    "quoted_spans",
    "parse_text_prompt",
    "text_mixture",
    "embed_text_prompt",
    "render_text",
    "make_text_prompts",
    "load_text_prompts",
    "text_latent",
    "text_modes",
    "split_text_prompts",
    "TEXT_FEATURES_AT",
]


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
_GLYPH_INDEX = {g: i for i, g in enumerate(GLYPHS) if i >= BLANKS}
_GLYPH_INDEX[" "] = BLANK
WORD_GAP = 2  # blank cells between words (OCR engines merge words one monospace cell apart)
SUPPORTED_CHARS = set(GLYPHS) | set(LETTERS.upper())


# ---------------------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True)
class Carrier:
    """What the world does with one carrier word: allowed case styles and layout anchors, spread.

    xs, ys, sizes, weights are anchor indices (x: 0..6 with 3 centred; y: 0..2 with 1 centred; size
    0..2 = 22/28/34 px; weight 0 regular, 1 bold). Modes are all combinations that fit the canvas.
    """

    cases: tuple[str, ...]
    xs: tuple[int, ...]
    ys: tuple[int, ...]
    sizes: tuple[int, ...]
    weights: tuple[int, ...]
    spread: float


CARRIERS: dict[str, Carrier] = {
    "sign": Carrier(("lower", "upper", "title"), (2, 3, 4), (1,), (1,), (1,), 0.025),
    "neon sign": Carrier(("lower",), (3,), (0, 1, 2), (0, 1, 2), (0,), 0.02),
    "poster": Carrier(("upper", "title"), (1, 2, 3, 4, 5), (0, 1), (1,), (1,), 0.035),
    "t-shirt": Carrier(("upper",), (3,), (0, 1, 2), (1, 2), (1,), 0.035),
    "storefront": Carrier(("upper", "title"), (2, 3, 4), (1,), (0, 1), (0, 1), 0.03),
    "book cover": Carrier(("title", "upper"), (3,), (0, 1), (1, 2), (1,), 0.03),
    "banner": Carrier(("lower", "upper"), (1, 2, 3, 4, 5), (1,), (1,), (0, 1), 0.025),
    "mug": Carrier(("lower", "title"), (3,), (1,), (0, 1, 2), (0,), 0.02),
    "street sign": Carrier(("upper",), (2, 3, 4), (0, 1, 2), (1,), (1,), 0.04),
    "chalkboard": Carrier(("lower", "title", "upper"), (2, 3), (1, 2), (0, 1), (0,), 0.03),
    "billboard": Carrier(("upper",), (1, 2, 3, 4, 5), (1,), (1, 2), (1,), 0.04),
    "label": Carrier(("lower",), (3,), (1,), (0,), (0, 1), 0.015),
}
GENERIC = Carrier(("lower", "upper", "title"), (2, 3, 4), (1,), (1,), (0,), 0.03)
CARRIER_NAMES = tuple(CARRIERS)
# longest names first, so "neon sign" wins over "sign"
_CARRIER_PATTERNS = [
    (name, re.compile(r"(?<![a-z])" + re.escape(name) + r"s?(?![a-z])")) for name in sorted(CARRIERS, key=len, reverse=True)
]

# short words every OCR engine reads in this font in every case (checked by tests/test_text_world.py)
WORDS = (
    "river", "open", "cafe", "sale", "hello", "stop", "jazz", "music", "bread", "fresh",
    "lemon", "happy", "love", "city", "park", "book", "sun", "moon", "star", "blue",
    "gold", "rain", "snow", "fire", "wind", "coffee", "pizza", "hotel", "bank", "beach",
    "honey", "candy", "dream", "peace", "ocean", "jungle", "winter", "tiger", "apple", "cherry",
    "forest", "smile", "dance", "green", "sweet", "home", "wave", "night", "bike", "farm",
)
TEMPLATES = (
    "a {carrier} that says '{text}'",
    "a {carrier} with the text '{text}'",
    "a photo of a {carrier} reading '{text}'",
    "'{text}' written on a {carrier}",
)


# ------------------------------------------------------------------------------------------- prompts

def is_text_prompt(prompt: str) -> bool:
    """True when the prompt asks for quoted text (the text world draws it, the OCR suite scores it)."""
    return bool(quoted_spans(prompt))


@dataclass(frozen=True)
class TextSpec:
    """What a text prompt asks for: its words (lowercase), the text to draw, the carrier word."""

    prompt: str
    words: tuple[str, ...]
    text: str
    carrier: str | None


def _normalise(prompt: str) -> str:
    return re.sub(r"\s+", " ", prompt.strip())


def parse_text_prompt(prompt: str) -> TextSpec:
    """Parse and validate a text prompt; a TextWorldError says what the world cannot draw."""
    spans = quoted_spans(prompt)
    if not spans:
        raise TextWorldError(f"not a text prompt (no quoted text): {prompt!r}")
    words = tuple(w for s in spans for w in s.lower().split())
    text = " ".join(words)
    bad = sorted({c for c in text if c not in SUPPORTED_CHARS})
    if bad:
        raise TextWorldError(
            f"the text world cannot draw {''.join(bad)!r} in {prompt!r} (it draws letters, digits and {GLYPHS[BLANKS:BLANKS + 8]!r})"
        )
    cells = len(_drawn(text, "lower"))
    if cells > MAX_TEXT_CHARS:
        raise TextWorldError(
            f"quoted text {text!r} needs {cells} character cells ({WORD_GAP} per word gap); the text world draws at most {MAX_TEXT_CHARS}"
        )
    low = prompt.lower()
    carrier = next((name for name, pat in _CARRIER_PATTERNS if pat.search(low)), None)
    return TextSpec(prompt=_normalise(prompt), words=words, text=text, carrier=carrier)


def make_text_prompts(seed: int = 0, n: int = 100, max_chars: int = 12) -> list[str]:
    """n distinct prompts `a <carrier> that says "<one or two words>"`, a seeded draw of our own."""
    if n > len(CARRIERS) * len(TEMPLATES) * len(WORDS):
        raise ValueError(f"cannot draw {n} distinct text prompts")
    rng = np.random.default_rng(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        carrier = CARRIER_NAMES[rng.integers(len(CARRIER_NAMES))]
        template = TEMPLATES[rng.integers(len(TEMPLATES))]
        count = 1 if rng.random() < 0.6 else 2
        words = [WORDS[i] for i in rng.choice(len(WORDS), size=count, replace=False)]
        text = " ".join(words)
        if len(text) > max_chars:
            continue
        prompt = template.format(carrier=carrier, text=text)
        if prompt in seen:
            continue
        seen.add(prompt)
        out.append(prompt)
    return out


def load_text_prompts(path: str | os.PathLike) -> list[str]:
    """Prompts from a UTF-8 text file, one per line. Empty lines, bad encoding, lines without quoted
    text or with text the world cannot draw raise a TextWorldError naming the file and line."""
    prompts = []
    for number, text in read_prompt_lines(path, TextWorldError):
        try:
            parse_text_prompt(text)
        except TextWorldError as err:
            raise TextWorldError(f"{path}:{number}: {err}") from None
        prompts.append(_normalise(text))
    return prompts


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
def _advance(size_index: int) -> float:
    return float(_font(size_index, 0).getlength("M"))


@lru_cache(maxsize=None)
def _vertical_extent(size_index: int) -> tuple[float, float]:
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


def _baseline(size_index: int) -> float:
    """Baseline (px) of the centred anchor for a font size: caps and x-height centred on the canvas."""
    return TEXT_HEIGHT / 2 + 0.36 * FONT_SIZES[size_index]


# -------------------------------------------------------------------------------------- the mixture


def _drawn(text: str, case: str) -> str:
    """The string a mode draws: the words in a case style, WORD_GAP blank cells apart."""
    words = text.lower().split()
    if case == "upper":
        words = [w.upper() for w in words]
    elif case == "title":
        words = [w[:1].upper() + w[1:] for w in words]
    elif case != "lower":
        raise ValueError(f"unknown case style {case!r}")
    return (" " * WORD_GAP).join(words)


def _fits(n_chars: int, x_index: int, y_index: int, size_index: int) -> bool:
    half = n_chars * _advance(size_index) / 2
    jitter_x = PX_PER_X * PLATEAU * X_STEP
    centre = TEXT_WIDTH / 2 + PX_PER_X * X_ANCHORS[x_index]
    if centre - jitter_x - half < MARGIN or centre + jitter_x + half > TEXT_WIDTH - MARGIN:
        return False
    top, bottom = _vertical_extent(size_index)
    jitter_y = PX_PER_Y * PLATEAU * Y_STEP
    baseline = _baseline(size_index) + PX_PER_Y * Y_ANCHORS[y_index]
    return baseline - jitter_y + top >= 1.0 and baseline + jitter_y + bottom <= TEXT_HEIGHT - 1.0


def text_latent(text: str, x_index: int = 3, y_index: int = 1, size_index: int = 1, weight_index: int = 0) -> torch.Tensor:
    """The latent [24] (float64) of `text` drawn exactly as written at the given anchors: a mode centre."""
    if len(text) > CELLS:
        raise TextWorldError(f"{text!r} is longer than the {CELLS} glyph cells of the latent")
    latent = torch.empty(LATENT_DIM, dtype=torch.float64)
    latent[X_DIM] = float(X_ANCHORS[x_index])
    latent[Y_DIM] = float(Y_ANCHORS[y_index])
    latent[SIZE_DIM] = float(SIZE_ANCHORS[size_index])
    latent[WEIGHT_DIM] = float(WEIGHT_ANCHORS[weight_index])
    codes = [_GLYPH_INDEX[c] for c in text] + [BLANK] * (CELLS - len(text))
    latent[GLYPH_DIM0:] = torch.as_tensor(GLYPH_ANCHORS[codes])
    return latent


def text_modes(spec: TextSpec) -> list[tuple[str, int, int, int, int]]:
    """The prompt's modes: (cased text, x, y, size, weight) anchor indices that fit the canvas."""
    carrier = CARRIERS.get(spec.carrier, GENERIC) if spec.carrier else GENERIC
    texts = list(dict.fromkeys(_drawn(spec.text, c) for c in carrier.cases))
    layouts = [
        (x, y, s, w)
        for x in carrier.xs
        for y in carrier.ys
        for s in carrier.sizes
        for w in carrier.weights
        if _fits(len(texts[0]), x, y, s)
    ]
    if not layouts:
        # the text is too long for this carrier's layouts: centred at the smallest size always fits
        layouts = [(3, 1, 0, w) for w in carrier.weights]
        if not _fits(len(texts[0]), 3, 1, 0):
            raise TextWorldError(f"quoted text {spec.text!r} does not fit the text world's canvas")
    return [(t, *layout) for t in texts for layout in layouts]


def text_spread(spec: TextSpec) -> float:
    carrier = CARRIERS.get(spec.carrier, GENERIC) if spec.carrier else GENERIC
    return carrier.spread


GLYPH_SPREAD = 0.02  # glyph codes stay crisp in every mode: the ceiling never draws a wrong letter


def text_spreads(spec: TextSpec) -> torch.Tensor:
    """Per-dimension spread [24] of every component: the carrier's spread on the layout dims (position
    jitter moves the text, it never ghosts it), GLYPH_SPREAD on the glyph cells."""
    spreads = torch.full((LATENT_DIM,), GLYPH_SPREAD, dtype=torch.float64)
    spreads[:GLYPH_DIM0] = text_spread(spec)
    return spreads


@lru_cache(maxsize=4096)
def _text_mixture(prompt: str) -> PromptMixture:
    spec = parse_text_prompt(prompt)
    modes = text_modes(spec)
    means = torch.stack([text_latent(*m) for m in modes])
    spreads = text_spreads(spec).expand(len(modes), -1).clone()
    return PromptMixture(means, torch.zeros(len(modes), dtype=torch.float64), spreads)


def text_mixture(prompt: str) -> PromptMixture:
    """The prompt's data distribution over the 24-dim latent: one equal-weight component per mode."""
    return _text_mixture(_normalise(prompt))


# ---------------------------------------------------------------------------------------- embedding

TEXT_FEATURES_AT = 30
"""Text features fill dims 30..47 of the 48-dim pooled vector; the scene world's bag of words uses
dims 0..29, so one policy can read both worlds without the two colliding."""
POOLED_DIM = 48


def embed_text_prompt(prompt: str) -> torch.Tensor:
    """Bag-of-features embedding [48] of a text prompt: the only view of it a policy gets.

    dim 30: a text prompt; 31..42: the carrier word (one-hot over CARRIERS, all zero when unknown);
    43: number of quoted words; 44: characters of the text / 10; 45: digits in the text;
    46: number of quoted spans; 47: letters / 10.
    """
    spec = parse_text_prompt(prompt)
    vec = torch.zeros(POOLED_DIM)
    base = TEXT_FEATURES_AT
    vec[base] = 1.0
    if spec.carrier is not None:
        vec[base + 1 + CARRIER_NAMES.index(spec.carrier)] = 1.0
    vec[base + 13] = float(len(spec.words))
    vec[base + 14] = len(spec.text) / 10.0
    vec[base + 15] = float(sum(c.isdigit() for c in spec.text))
    vec[base + 16] = float(len(quoted_spans(prompt)))
    vec[base + 17] = sum(c.isalpha() for c in spec.text) / 10.0
    return vec


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
            adv = _advance(s)
            for dy, wy in ys:
                baseline = _baseline(s) + dy
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


def split_text_prompts(prompts: Sequence[str], split: str) -> list[str]:
    """A fixed split: every 4th prompt in a hashed order is held out for test."""
    if split == "all":
        return list(prompts)
    check_split(split)
    order = hashed_order(prompts, key=sha256_digest)  # the whole digest's order (this split predates stable_hash)
    held = {order[i] for i in held_out_positions(len(order))}
    return [p for p in prompts if (p in held) == (split == "test")]

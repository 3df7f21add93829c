"""The embedded world's text scenes: prompts with quoted text and their data distribution (the canvas, font
and decoder that draw them: jsbench/world/text_canvas.py).

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
from typing import Sequence

import numpy as np
import torch

from jsbench.io import read_prompt_lines
from jsbench.scoring.text import quoted_spans
from jsbench.splits import check_split, hashed_order, held_out_positions, sha256_digest
from jsbench.world.mixture import PromptMixture
from jsbench.world.scenes import LATENT_DIM
from jsbench.world.text_canvas import (  # the canvas this module lays prompts out on
    BLANK, BLANKS, CELLS, GLYPH_ANCHORS, GLYPH_DIM0, GLYPH_INDEX, GLYPHS, MARGIN, MAX_TEXT_CHARS, PLATEAU, PX_PER_X,
    PX_PER_Y, SIZE_ANCHORS, SIZE_DIM, SUPPORTED_CHARS, TEXT_HEIGHT, TEXT_WIDTH, WEIGHT_ANCHORS, WEIGHT_DIM, WORD_GAP,
    X_ANCHORS, X_DIM, X_STEP, Y_ANCHORS, Y_DIM, Y_STEP, TextWorldError, centred_baseline, font_advance, glyph_extent,
)

__all__ = [
    "TextSpec",
    "WORDS",
    "CARRIERS",
    "is_text_prompt",
    "quoted_spans",
    "parse_text_prompt",
    "text_mixture",
    "embed_text_prompt",
    "make_text_prompts",
    "load_text_prompts",
    "text_latent",
    "text_modes",
    "split_text_prompts",
    "TEXT_FEATURES_AT",
]


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
    half = n_chars * font_advance(size_index) / 2
    jitter_x = PX_PER_X * PLATEAU * X_STEP
    centre = TEXT_WIDTH / 2 + PX_PER_X * X_ANCHORS[x_index]
    if centre - jitter_x - half < MARGIN or centre + jitter_x + half > TEXT_WIDTH - MARGIN:
        return False
    top, bottom = glyph_extent(size_index)
    jitter_y = PX_PER_Y * PLATEAU * Y_STEP
    baseline = centred_baseline(size_index) + PX_PER_Y * Y_ANCHORS[y_index]
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
    codes = [GLYPH_INDEX[c] for c in text] + [BLANK] * (CELLS - len(text))
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


def split_text_prompts(prompts: Sequence[str], split: str) -> list[str]:
    """A fixed split: every 4th prompt in a hashed order is held out for test."""
    if split == "all":
        return list(prompts)
    check_split(split)
    order = hashed_order(prompts, key=sha256_digest)  # the whole digest's order (this split predates stable_hash)
    held = {order[i] for i in held_out_positions(len(order))}
    return [p for p in prompts if (p in held) == (split == "test")]

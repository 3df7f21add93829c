"""The detail world: the embedded scene world whose objects carry a texture that lives at a scale.

The positive control for instance-level schedules (../shared/notes/detail-scales.md). With an exact
posterior mean, choosing among modes is solved by one global schedule (the `analytic` world). Detail is
different: content whose data spread is s is only resolved by steps taken near t ~ s, and the posterior
mean at higher noise is blurry. So here every scene also has a texture, and the evaluator requires it.

Latent (41 dims): the scene world's 24 dims (`jsbench.world.scenes`, unchanged), then

    dim 24      texture class tau, on a line of anchors (hairline, fine, medium, broad)
    dims 25..40 detail d, 16 dims ~ N(0, s^2 I) with s the texture's scale (0.03, 0.08, 0.2, 0.5)

A prompt names its texture ("... with fine stripes"): its mixture is the scene mixture with tau at that
anchor and detail spread s. Two phrases leave it open: "with stripes" (fine or broad) and "with mixed
stripes" (hairline or medium): their mixture holds every arrangement twice, once per texture, with equal
weights, and the initial noise decides which one a sample becomes (mostly the sign of x_T[24]; the
anchors are far apart so that the mode is settled before any detail is resolved, and a schedule cannot
steer every sample into the texture it resolves best).

Decoder: the scene renderer draws the objects; the texture is diagonal stripes over every object's
interior, with the period of the texture class nearest to tau, and depth STRIPE_DEPTH * A, where
A = min(|d| / (s sqrt(16)), 1) is the detail energy relative to a true sample's at that class's scale s
(1 for a sample of the data, 0 for the blurry posterior mean).
Evaluator: the scene world's detector finds the objects; a matched filter over the four stripe patterns
measures each object's stripe depth, and an object counts only if its texture is resolved (A >= 0.55).
Then GenEval's rules apply as usual. Many-step sampling passes; a few-step schedule passes only if its
steps sit at the prompt's scale, and for the open prompts at the scale the noise chose.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.scoring.geneval import Detection
from jsbench.splits import stable_hash
from jsbench.world.mixture import MixtureTable, PromptMixture, RowMixtures
from jsbench.world.scenes import BACKGROUND, LATENT_DIM as SCENE_DIM, make_prompts

__all__ = [
    "TEXTURES",
    "TEXTURE_SCALES",
    "PHRASES",
    "DETAIL_DIM",
    "LATENT_DIM",
    "DETAIL_THRESHOLD",
    "DetailWorld",
    "make_detail_prompts",
    "parse_detail_prompt",
    "embed_detail_prompt",
    "detail_mixture",
    "render_detail",
    "detail_strength",
    "texture_class",
    "texture_strength",
    "detect_detail",
    "interior_mask",
    "noise_mode",
]

TEXTURES = ("hairline", "fine", "medium", "broad")
TEXTURE_SCALES = (0.03, 0.08, 0.2, 0.5)
TEXTURE_ANCHORS = (-4.5, -1.5, 1.5, 4.5)  # far apart: the texture mode is settled at high noise
STRIPE_PERIODS = (2, 4, 6, 8)  # px; diagonal stripes, so a class is visible as well as measurable
TEXTURE_SPREAD = 0.05
DETAIL_DIM = 16
TEXTURE_DIM = SCENE_DIM  # index of tau
LATENT_DIM = SCENE_DIM + 1 + DETAIL_DIM
STRIPE_DEPTH = 0.12  # a resolved texture lightens its stripes by 12% of the object's contrast
DETAIL_THRESHOLD = 0.55  # an object counts when its stripe depth is at least 0.55 of a true sample's

# phrase key -> the textures it allows (equal weights); the key is the words after "with"
PHRASES = {
    "hairline stripes": ("hairline",),
    "fine stripes": ("fine",),
    "medium stripes": ("medium",),
    "broad stripes": ("broad",),
    "stripes": ("fine", "broad"),
    "mixed stripes": ("hairline", "medium"),
}
OPEN_PHRASES = tuple(k for k, v in PHRASES.items() if len(v) > 1)
SMALL_TASK = 12  # tasks with at most this many scene prompts get every phrase; larger ones cycle through them

# the words a policy reads: the scene world's bag of words, then these texture words in the free slots
TEXTURE_WORDS = ("with", "stripes", "hairline", "fine", "medium", "broad", "mixed")


class UnknownDetailPrompt(JsbenchError):
    pass


def _normalise(prompt: str) -> str:
    return re.sub(r"\s+", " ", prompt.strip().lower())


# ---------------------------------------------------------------------------------------------- prompts


def make_detail_prompts() -> list[dict]:
    """Every prompt of the detail world, as GenEval metadata (tag, prompt, include, exclude) plus the scene
    prompt it extends and its texture phrase. Small tasks take every phrase; larger ones cycle through
    the phrases in a seeded order, so each phrase appears in every task."""
    scene = make_prompts()
    phrases = list(PHRASES)
    out: list[dict] = []
    for tag in dict.fromkeys(p["tag"] for p in scene):
        group = sorted((p for p in scene if p["tag"] == tag), key=lambda p: stable_hash(p["prompt"]))
        for i, meta in enumerate(group):
            chosen = phrases if len(group) <= SMALL_TASK else [phrases[i % len(phrases)]]
            for phrase in chosen:
                entry = {k: v for k, v in meta.items() if k != "prompt"}
                entry.update(prompt=f"{meta['prompt']} with {phrase}", scene_prompt=meta["prompt"], texture=phrase)
                out.append(entry)
    return out


@lru_cache(maxsize=1)
def _prompt_index() -> dict[str, dict]:
    return {p["prompt"]: p for p in make_detail_prompts()}


def parse_detail_prompt(prompt: str) -> dict:
    meta = _prompt_index().get(_normalise(prompt))
    if meta is None:
        raise UnknownDetailPrompt(
            f"the detail world cannot draw {prompt!r}: it knows the scene world's prompts followed by "
            f"'with <{' | '.join(PHRASES)}>' (see `jsbench prompts --suite geneval --backbone detail --split all`)"
        )
    return meta


def embed_detail_prompt(prompt: str) -> torch.Tensor:
    """The scene world's bag of words, with the texture words counted in the slots it leaves free."""
    from jsbench.world import POOLED_DIM, VOCAB, embed_prompt

    vec = embed_prompt(prompt)
    words = re.findall(r"[a-z]+", prompt.lower())
    for j, word in enumerate(TEXTURE_WORDS):
        vec[len(VOCAB) + j] += float(words.count(word))
    assert len(VOCAB) + len(TEXTURE_WORDS) <= POOLED_DIM
    return vec


# ------------------------------------------------------------------------------------------- mixtures


@lru_cache(maxsize=4096)
def detail_mixture(prompt: str) -> PromptMixture:
    """The scene mixture of the prompt's scene, once per allowed texture: tau at the texture's anchor, the
    16 detail dims centred at 0 with the texture's spread."""
    from jsbench.world import EmbeddedWorld

    meta = parse_detail_prompt(prompt)
    scene = EmbeddedWorld().mixture(meta["scene_prompt"])  # the scene world's cached mixture
    k = scene.means.shape[0]
    means, spreads, log_w = [], [], []
    textures = PHRASES[meta["texture"]]
    for name in textures:
        i = TEXTURES.index(name)
        tau = torch.full((k, 1), TEXTURE_ANCHORS[i], dtype=torch.float64)
        means.append(torch.cat([scene.means, tau, torch.zeros(k, DETAIL_DIM, dtype=torch.float64)], 1))
        spreads.append(
            torch.cat(
                [scene.spread_tensor(), torch.full((k, 1), TEXTURE_SPREAD, dtype=torch.float64), torch.full((k, DETAIL_DIM), TEXTURE_SCALES[i], dtype=torch.float64)],
                1,
            )
        )
        log_w.append(torch.log_softmax(scene.log_weights.to(torch.float64), 0) - math.log(len(textures)))
    return PromptMixture(means=torch.cat(means), log_weights=torch.cat(log_w), spreads=torch.cat(spreads))


def noise_mode(x_T: torch.Tensor, prompts: list[str]) -> torch.Tensor:
    """Which of its textures the noise points a sample of an open prompt to (0: the first, 1: the
    second; always 0 for a prompt with one texture): the side of the two anchors' midpoint that
    x_T's texture coordinate lies on, mapped through the flow's quantiles (equal weights: the sign)."""
    open_rows = torch.tensor([len(PHRASES[parse_detail_prompt(p)["texture"]]) > 1 for p in prompts])
    return ((x_T[:, TEXTURE_DIM].cpu() > 0) & open_rows).long()


# ---------------------------------------------------------------------------------------------- decoder


def _texture_position(tau: torch.Tensor) -> torch.Tensor:
    anchors = torch.tensor(TEXTURE_ANCHORS, dtype=tau.dtype)
    return ((tau - anchors[0]) / (anchors[1] - anchors[0])).clamp(0, len(TEXTURES) - 1)


def texture_class(latents: torch.Tensor) -> torch.Tensor:
    """Index into TEXTURES of the anchor nearest to each row's texture coordinate."""
    return _texture_position(latents[:, TEXTURE_DIM].detach().to(torch.float64).cpu()).round().long()


def detail_strength(latents: torch.Tensor) -> torch.Tensor:
    """A = min(|d| / (s sqrt(D)), 1) per row: the detail energy relative to a sample of the data, with s the
    scale of the texture class the latent's own texture coordinate is nearest to (the class the stripes show)."""
    latents = latents.detach().to(torch.float64).cpu()
    s = torch.tensor(TEXTURE_SCALES, dtype=torch.float64)[texture_class(latents)]
    d = latents[:, TEXTURE_DIM + 1 : TEXTURE_DIM + 1 + DETAIL_DIM]
    return (d.norm(dim=1) / (s * math.sqrt(DETAIL_DIM))).clamp(0.0, 1.0)


@lru_cache(maxsize=8)
def _stripes(canvas: int) -> torch.Tensor:
    """[T, canvas, canvas] 0/1 stripe masks, one per texture class (diagonal, period STRIPE_PERIODS[i])."""
    ys, xs = torch.meshgrid(torch.arange(canvas), torch.arange(canvas), indexing="ij")
    return torch.stack([(((xs + ys) % p) < p // 2).to(torch.float32) for p in STRIPE_PERIODS])


def render_detail(latents: torch.Tensor) -> torch.Tensor:
    """[B, 41] detail latents -> [B, 3, 48, 48]: the scene renderer's image, objects striped."""
    from jsbench.world.render import render_scenes

    from jsbench.world.detect import FOREGROUND_THRESHOLD, erode_in_plane

    latents = latents.detach().cpu()
    image = render_scenes(latents[:, :SCENE_DIM])
    canvas = image.shape[-1]
    bg = torch.tensor(BACKGROUND, dtype=torch.float32)[None, :, None, None]
    # stripes cover the objects' interiors (foreground pixels whose four neighbours are foreground too, the
    # detector's own erosion), not their anti-aliased edges, so outlines, and with them shapes, stay as drawn
    fg = ((image - bg).abs().amax(1) > FOREGROUND_THRESHOLD).numpy()
    interior = torch.from_numpy(erode_in_plane(fg)).to(torch.float32)
    cls = texture_class(latents)
    depth = (STRIPE_DEPTH * detail_strength(latents)).to(torch.float32)
    lighten = 1.0 - depth[:, None, None] * _stripes(canvas)[cls] * interior  # [B, H, W]
    return bg + (image - bg) * lighten[:, None]


# -------------------------------------------------------------------------------------------- evaluator


def texture_strength(contrast: np.ndarray, interior: np.ndarray, box) -> tuple[float, int]:
    """(A, class) of the object in `box`: for each stripe pattern, 1 - mean contrast on its stripes over
    mean contrast off them, on the object's interior pixels (`interior_mask`), divided by STRIPE_DEPTH; the
    best-matching pattern wins. A blurry object has flat contrast (A ~ 0); a sample of the data A ~ 1."""
    h, w = contrast.shape
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    x0, y0, x1, y1 = max(x0 - 1, 0), max(y0 - 1, 0), min(x1 + 1, w), min(y1 + 1, h)
    core = interior[y0:y1, x0:x1]
    values = contrast[y0:y1, x0:x1]
    stripes = _stripe_masks(max(h, w))[:, y0:y1, x0:x1]
    best, best_cls = 0.0, -1
    for i in range(len(TEXTURES)):
        on, off = stripes[i] & core, ~stripes[i] & core
        if np.count_nonzero(on) < 2 or np.count_nonzero(off) < 2:
            continue
        strength = (1.0 - _mean(values[on]) / _mean(values[off])) / STRIPE_DEPTH
        if strength > best:
            best, best_cls = float(strength), i
    return best, best_cls


def _mean(values: np.ndarray) -> np.floating:
    """`values.mean()` of a non-empty 1-D array, as numpy computes it (its pairwise sum in the array's dtype,
    divided by the count as an intp, cast back), without the argument handling that costs more than the sum
    on the few dozen pixels of one object's stripes."""
    total = np.add.reduce(values)
    return total.dtype.type(total / np.intp(values.size))


@lru_cache(maxsize=8)
def _stripe_masks(canvas: int) -> np.ndarray:
    """`_stripes(canvas)` as a read-only bool array, made once per canvas for the evaluator's many reads."""
    masks = _stripes(canvas).numpy().astype(bool)
    masks.flags.writeable = False
    return masks


def interior_mask(images: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(contrast [B, H, W], interior [B, H, W]): each pixel's largest channel difference from the background,
    and the foreground pixels whose four neighbours are foreground too (where the renderer draws stripes)."""
    from jsbench.world.detect import pixel_maps

    maps = pixel_maps(images)
    return maps.contrast, maps.interior


def detect_detail(images: torch.Tensor) -> list[list[Detection]]:
    """The scene world's detections, keeping only objects whose texture is resolved (A >= DETAIL_THRESHOLD)."""
    from jsbench.world.detect import detect, pixel_maps

    maps = pixel_maps(images)  # one set of maps for the detector and the texture check
    found = detect(images, maps)
    contrast, interior = maps.contrast, maps.interior
    return [[d for d in dets if texture_strength(contrast[b], interior[b], d.box)[0] >= DETAIL_THRESHOLD] for b, dets in enumerate(found)]


# ------------------------------------------------------------------------------------------------ world


class DetailWorld:
    """The facade the `detail` backbone serves (the same calls as `EmbeddedWorld`), plus what the GenEval
    suite asks of a world that brings its own prompts and detector: `geneval_prompts()` and `detect()`."""

    latent_dim = LATENT_DIM
    detector_id = "embedded-exact+texture"

    @property
    def pooled_dim(self) -> int:
        from jsbench.world import POOLED_DIM

        return POOLED_DIM

    @staticmethod
    def geneval_prompts() -> list[dict]:
        return make_detail_prompts()

    @staticmethod
    def detect(images: torch.Tensor) -> list[list[Detection]]:
        return detect_detail(images)

    def validate(self, prompt: str) -> None:
        parse_detail_prompt(prompt)

    def embed(self, prompt: str) -> torch.Tensor:
        return embed_detail_prompt(prompt)

    def mixture(self, prompt: str) -> PromptMixture:
        return detail_mixture(_normalise(prompt))

    def table(self, prompts: list[str], dtype=torch.float32, device=None) -> tuple[MixtureTable, torch.Tensor]:
        """A mixture table of the batch's distinct prompts and, per row, the index of its prompt in it."""
        keys = [_normalise(p) for p in prompts]
        distinct = list(dict.fromkeys(keys))
        table = MixtureTable([detail_mixture(p) for p in distinct], dtype=dtype, device=device)
        return table, torch.tensor([distinct.index(k) for k in keys], dtype=torch.long, device=device)

    def row_mixture(self, prompt: str, dtype=torch.float64, device=None) -> RowMixtures:
        """The prompt's mixture as one gathered row [1, K, ...] of `dtype` on `device`, made once per prompt:
        the detail sampler's groups are copies of these rows."""
        return _row_mixture(_normalise(prompt), dtype, str(device) if device is not None else None)

    def render(self, latents: torch.Tensor, prompts: list[str]) -> torch.Tensor:
        return render_detail(latents)


@lru_cache(maxsize=1024)
def _row_mixture(prompt: str, dtype: torch.dtype, device: str | None) -> RowMixtures:
    one = MixtureTable([detail_mixture(prompt)], dtype=dtype, device=device).gather(torch.zeros(1, dtype=torch.long, device=device))
    return RowMixtures(means=one.means, log_weights=one.log_weights, spread2=one.spread2)

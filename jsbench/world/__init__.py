"""The embedded world: prompts -> exact data distributions over latents, a renderer and exact evaluators.

`EmbeddedWorld` is what the `analytic` backbone serves. Prompts are parsed into GenEval-style
metadata by `parse_prompt`; each prompt's mixture is built once and cached.
"""

from __future__ import annotations

import re
from functools import lru_cache

import torch

from jsbench import JsbenchError
from jsbench.world.mixture import MixtureTable, PromptMixture, euler_flow
from jsbench.world.scenes import (
    COLORS,
    LATENT_DIM,
    NUMBER_WORDS,
    PLURALS,
    SHAPES,
    make_prompts,
    scene_mixture,
)

__all__ = ["EmbeddedWorld", "parse_prompt", "VOCAB", "LATENT_DIM", "MixtureTable", "PromptMixture", "euler_flow"]

# The words the analytic backbone's "text encoder" knows; the pooled embedding is a bag of them.
VOCAB = (
    list(SHAPES)
    + [PLURALS[s] for s in SHAPES]
    + list(COLORS)
    + list(NUMBER_WORDS.values())
    + ["left", "right", "above", "below", "and", "of", "photo", "a", "an"]
)
POOLED_DIM = 48
assert len(VOCAB) <= POOLED_DIM


class UnknownPrompt(JsbenchError):
    pass


@lru_cache(maxsize=None)
def _scene_prompt_index() -> dict[str, dict]:
    return {p["prompt"]: p for p in make_prompts()}


def parse_prompt(prompt: str) -> dict:
    """GenEval metadata for a prompt the embedded world can draw (its own prompts, any casing/spacing)."""
    key = _normalise(prompt)
    meta = _scene_prompt_index().get(key)
    if meta is None:
        raise UnknownPrompt(
            f"the analytic world cannot draw {prompt!r}: it knows GenEval-style prompts over the shapes "
            f"{', '.join(SHAPES)} (see `jsbench prompts --suite geneval`)"
        )
    return meta


def embed_prompt(prompt: str) -> torch.Tensor:
    """Bag-of-words embedding [POOLED_DIM]: the only view of the prompt a policy gets."""
    vec = torch.zeros(POOLED_DIM)
    for word in re.findall(r"[a-z]+", prompt.lower()):
        if word in VOCAB:
            vec[VOCAB.index(word)] += 1.0
    return vec


TOKEN_LENGTH = 24
"""Token rows of an embedded world's prompt (`token_features`): longer prompts are cut, shorter ones padded."""


def token_features(prompt: str, embed) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompt's per-token features for the policy: ([TOKEN_LENGTH, POOLED_DIM], mask [TOKEN_LENGTH]).

    One row per word, `embed(word)` (a word the world does not know is a zero row, still a token: its place
    keeps the order), so the rows sum to the bag of words; a text prompt (quoted words) is one row, its
    whole-prompt features (`embed(prompt)`), which are not a sum over words."""
    from jsbench.world.text import is_text_prompt

    rows = [embed(prompt)] if is_text_prompt(prompt) else [embed(w) for w in re.findall(r"[a-z]+", prompt.lower())]
    rows = rows[:TOKEN_LENGTH] or [torch.zeros(POOLED_DIM)]
    tokens = torch.zeros(TOKEN_LENGTH, POOLED_DIM)
    tokens[: len(rows)] = torch.stack(rows)
    mask = torch.zeros(TOKEN_LENGTH, dtype=torch.bool)
    mask[: len(rows)] = True
    return tokens, mask


@lru_cache(maxsize=4096)
def _mixture(prompt: str) -> PromptMixture:
    return scene_mixture(parse_prompt(prompt))


class MixedBatch(JsbenchError):
    pass


@lru_cache(maxsize=4096)
def _text_mixture(prompt: str) -> PromptMixture:
    from jsbench.world.text import text_mixture

    return text_mixture(prompt)


class EmbeddedWorld:
    """The scene world and the text world behind one facade.

    Scene prompts share one mixture table over every prompt the world knows, built once; text prompts
    (quoted words) get a table per batch from cached mixtures. A batch is all scenes or all text: the
    two render at different sizes.
    """

    latent_dim = LATENT_DIM
    pooled_dim = POOLED_DIM

    def __init__(self):
        self._tables: dict[tuple, tuple[MixtureTable, dict[str, int]]] = {}

    @staticmethod
    def is_text(prompt: str) -> bool:
        from jsbench.world.text import is_text_prompt

        return is_text_prompt(prompt)

    def _kind(self, prompts: list[str]) -> str:
        kinds = {self.is_text(p) for p in prompts}
        if len(kinds) > 1:
            raise MixedBatch("a batch mixes text prompts and scene prompts; sample them separately")
        return "text" if kinds == {True} else "scene"

    def validate(self, prompt: str) -> None:
        if self.is_text(prompt):
            from jsbench.world.text import parse_text_prompt

            parse_text_prompt(prompt)
        else:
            parse_prompt(prompt)

    def embed(self, prompt: str) -> torch.Tensor:
        if self.is_text(prompt):
            from jsbench.world.text import embed_text_prompt

            return embed_text_prompt(prompt)
        return embed_prompt(prompt)

    def mixture(self, prompt: str) -> PromptMixture:
        return _text_mixture(prompt) if self.is_text(prompt) else _mixture(_normalise(prompt))

    def table(self, prompts: list[str], dtype=torch.float32, device=None) -> tuple[MixtureTable, torch.Tensor]:
        """A mixture table and, per row, the index of its prompt in it."""
        if self._kind(prompts) == "text":
            distinct = list(dict.fromkeys(prompts))
            table = MixtureTable([_text_mixture(p) for p in distinct], dtype=dtype, device=device)
            return table, torch.tensor([distinct.index(p) for p in prompts], dtype=torch.long, device=device)
        key = (dtype, str(device))
        if key not in self._tables:
            known = list(_scene_prompt_index())
            self._tables[key] = (MixtureTable([_mixture(p) for p in known], dtype=dtype, device=device), {p: i for i, p in enumerate(known)})
        table, index = self._tables[key]
        rows = torch.tensor([index[_normalise(p)] for p in prompts], dtype=torch.long, device=device)
        return table, rows

    def render(self, latents: torch.Tensor, prompts: list[str]) -> torch.Tensor:
        if self._kind(prompts) == "text":
            from jsbench.world.text_canvas import render_text

            return render_text(latents, prompts)
        from jsbench.world.render import render_scenes

        return render_scenes(latents)


def _normalise(prompt: str) -> str:
    return re.sub(r"\s+", " ", prompt.strip().lower())

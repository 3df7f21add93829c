"""Tiny random-weight diffusers pipelines, built from config, for tests, benchmarks and smoke checks.

Why this exists: the real backbones (SD-XL, SD3.5, Flux) cannot be downloaded where jsbench is built
and tested, yet every line of their adapters must run. These builders make pipelines with the *real*
pipeline classes and the *real* component classes (UNet2DConditionModel, SD3Transformer2DModel,
FluxTransformer2DModel, AutoencoderKL, CLIPTextModel(WithProjection), T5EncoderModel, the real
schedulers with the real models' scheduler configs), only a few thousand parameters wide. Tokenizers
are built in memory (a byte-level BPE vocabulary for CLIP, a small Unigram vocabulary for T5) because
the hub's tiny test tokenizers are not reachable. Each pipeline is written with `save_pretrained` so
tests load it back through exactly the path users take (`load_backbone(name, model=DIR)`).

Each adapter builds its own tiny pipeline (a `tiny_pipeline` classmethod next to the adapter: sdxl.py,
sd35.py, flux.py) and declares the size it samples at (its `tiny_sampling` class attribute); this module holds
what they share (tokenizers, text-encoder and VAE builders), the table of those sizes derived from the classes
(TINY_SAMPLING), and the seeding and saving around them.

A `jsbench.json` next to `model_index.json` records the resolution to sample at (and the T5 length),
since the pipelines' own defaults (1024 px, 512 T5 tokens) would make a tiny model slow for no reason.

Run `python -m jsbench.backbones.tiny OUT_DIR` to write all four under OUT_DIR/<backbone name>.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from jsbench.io import write_text_atomic

__all__ = [
    "TINY_KINDS",
    "TINY_SAMPLING",
    "REAL_LATENT_SAMPLING",
    "build_tiny_pipeline",
    "save_tiny_pipeline",
    "save_all_tiny",
    "tiny_clip_tokenizer",
    "bytes_to_unicode",
    "tiny_t5_tokenizer",
    "clip_config",
    "t5_encoder",
    "tiny_vae",
]

def _tiny_sampling() -> dict[str, dict]:
    """Backbone name -> the sampling settings of its tiny pipeline, from the adapters that declare one."""
    from jsbench.backbones import declared_by_class

    return {name: dict(sampling) for name, sampling in declared_by_class("tiny_sampling").items()}


#: the backbones with a tiny pipeline, and the resolution and T5 length each is sampled at (written to
#: jsbench.json): read from the adapters' `tiny_sampling`. A backbone's tiny pipeline is built by its adapter's
#: `tiny_pipeline` classmethod; giving a new backbone one is that classmethod and that attribute in its class.
TINY_SAMPLING = _tiny_sampling()

TINY_KINDS = tuple(TINY_SAMPLING)

_WORDS = (
    "a an the of on in with and red green blue yellow white black cat dog car tree house sign "
    "says hello world photo painting two three small large left right above below next to"
).split()


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's reversible byte -> printable-unicode table (what tokenizers' ByteLevel emits)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def tiny_clip_tokenizer(model_max_length: int = 77):
    """A CLIP BPE tokenizer whose vocabulary is every byte symbol, alone and word-final, plus a few merges.

    Every string tokenizes (no unknown tokens); ids stay below 600 so a 1000-word text model covers them.
    """
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in bytes_to_unicode().values():
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    merges = []
    # a few real merges so words are not all single characters (exercises the BPE path)
    for a, b in [("t", "h"), ("th", "e</w>"), ("c", "a"), ("ca", "t</w>"), ("r", "e"), ("re", "d</w>")]:
        merges.append((a, b))
        vocab.setdefault(a + b, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=model_max_length)


def tiny_t5_tokenizer(model_max_length: int = 512):
    """A T5 Unigram tokenizer over single letters, digits and a few whole words (ids < 200)."""
    from transformers import T5Tokenizer

    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    for w in _WORDS:
        vocab.append(("▁" + w, -3.0))
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789.,!?'":
        vocab.append((ch, -5.0))
        vocab.append(("▁" + ch, -5.5))
    return T5Tokenizer(vocab=vocab, extra_ids=0, model_max_length=model_max_length)


def clip_config(hidden: int = 32, projection: int = 32, layers: int = 2):
    """A tiny CLIP text encoder config (vocabulary 1000: covers `tiny_clip_tokenizer`'s ids)."""
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        bos_token_id=0,
        eos_token_id=1,  # != 2: pooled output found at the first eos, the modern CLIP code path
        pad_token_id=1,
        hidden_size=hidden,
        intermediate_size=37,
        layer_norm_eps=1e-5,
        num_attention_heads=4,
        num_hidden_layers=layers,
        vocab_size=1000,
        hidden_act="gelu",
        projection_dim=projection,
        max_position_embeddings=77,
    )


def t5_encoder(d_model: int = 32):
    """A tiny random-weight T5 encoder of width `d_model` (vocabulary 256: covers `tiny_t5_tokenizer`'s ids)."""
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(
        vocab_size=256,
        d_model=d_model,
        d_kv=8,
        d_ff=37,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    return T5EncoderModel(cfg)


def tiny_vae(latent_channels: int, shift_factor: float | None, scaling_factor: float):
    """Two blocks: a vae_scale_factor of 2, so pixel/latent sizes differ as they do for real."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 8),
        layers_per_block=1,
        latent_channels=latent_channels,
        norm_num_groups=4,
        sample_size=32,
        shift_factor=shift_factor,
        scaling_factor=scaling_factor,
        use_quant_conv=shift_factor is None,  # SD-XL's VAE has quant convs, SD3/Flux's do not
        use_post_quant_conv=shift_factor is None,
    )


def build_tiny_pipeline(kind: str, seed: int = 0, max_latent_side: int = 32, mu_tokens: int | None = None):
    """A random-weight pipeline of the real class for backbone `kind` (one of TINY_KINDS).

    The pipeline is the adapter's own: `backbone_class(kind).tiny_pipeline(...)`, built in the adapter's
    module (sdxl.py, sd35.py, flux.py) after seeding torch's global generator with `seed`.

    `max_latent_side`: the largest latent grid the tiny SD3 transformer's position table covers (32 by
    default; 128 for the real models' 1024^2 latents). `mu_tokens`: give Flux-Dev's dynamic shift its
    full value mu = max_shift = 1.15 (as at 1024^2, 4096 tokens) already at this many image tokens, by
    scaling the scheduler's token range [256, 4096] by mu_tokens / 4096; tests use it to run Flux-Dev's
    1024^2 schedule on 64 tokens (a 4096-token tiny Flux costs ~1.7 s per step on one CPU core in bf16).
    Builders ignore the options that do not apply to them.
    """
    from jsbench.backbones import backbone_class

    cls = backbone_class(kind) if kind in TINY_SAMPLING else None
    if cls is None:
        raise ValueError(f"no tiny pipeline for {kind!r}; choose one of {TINY_KINDS}")
    torch.manual_seed(seed)
    return cls.tiny_pipeline(max_latent_side=max_latent_side, mu_tokens=mu_tokens)


#: the real models' latent grids at their default image size (the adapter's `default_image_size`, 1024^2 for
#: all four): 128x128 latents (Flux/SD3: 4096 image tokens, the token count at which Flux-Dev's dynamic shift
#: reaches mu = max_shift = 1.15). The tiny VAEs downsample by 2, not 8, so 256 px gives the tiny pipelines
#: the same latent grid and the same token count.
REAL_VAE_FACTOR, TINY_VAE_FACTOR = 8, 2


def _real_latent_sampling(kind: str) -> dict:
    from jsbench.backbones import backbone_class

    side = backbone_class(kind).default_image_size // REAL_VAE_FACTOR * TINY_VAE_FACTOR
    return {**TINY_SAMPLING[kind], "height": side, "width": side}


REAL_LATENT_SAMPLING = {kind: _real_latent_sampling(kind) for kind in TINY_KINDS}


def save_tiny_pipeline(kind: str, path: str | Path, seed: int = 0, sampling: dict | None = None, **build) -> Path:
    """Build, `save_pretrained` (safetensors) and write jsbench.json; returns the folder.

    `sampling` replaces the sampling settings written to jsbench.json (default TINY_SAMPLING[kind]);
    `{}` writes none, so the adapter runs at its own defaults (the pipeline's: 256 px for tiny Flux,
    T5 length 512, ...). `build` goes to `build_tiny_pipeline` (max_latent_side, mu_tokens)."""
    path = Path(path)
    pipe = build_tiny_pipeline(kind, seed=seed, **build)
    pipe.save_pretrained(path, safe_serialization=True)
    settings = TINY_SAMPLING[kind] if sampling is None else sampling
    write_text_atomic(path / "jsbench.json", json.dumps({"tiny": kind, **settings}, indent=1))
    return path


def save_all_tiny(root: str | Path, kinds=TINY_KINDS) -> dict[str, Path]:
    root = Path(root)
    return {k: save_tiny_pipeline(k, root / k) for k in kinds}


if __name__ == "__main__":  # pragma: no cover
    out = sys.argv[1] if len(sys.argv) > 1 else "tiny-pipelines"
    for kind, p in save_all_tiny(out).items():
        print(f"{kind}: {p}")

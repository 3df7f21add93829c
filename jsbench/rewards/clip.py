"""CLIP-family rewards on open_clip directly: HPSv2 (`hps`) and CLIP score (`clip`).

One `ClipModel` wraps any CLIP-like model (`encode_image`, `encode_text`) with its tokenizer and a
preprocessing done in torch on the [B, 3, H, W] image batch in [0, 1], so images never leave the device
and a batch is one forward. Two preprocessings:
- `crop` (open_clip's evaluation transform, CLIP score): resize the short side to the model's input
  size (bicubic, antialiased), centre crop, normalise;
- `pad` (hpsv2's `ResizeMaxSize`, HPSv2): resize the LONG side to the input size (bicubic, antialiased,
  sides rounded as Python's `round`), pad with zeros (black, before normalising) to a square, the odd
  pixel of padding going right / bottom, normalise; no clamping after the resize (hpsv2 resizes float
  tensors). The images are first quantised to 8 bits as a saved PNG would be, since hpsv2 reads
  image files. The two agree only on square images.
Models are built once per process (`load_open_clip` caches by architecture, weights and device); on CUDA
they run in bf16, except HPSv2, which runs as hpsv2 does: float32 weights under float16 autocast.

- `hps`: HPSv2 (Wu et al., 2023): open_clip ViT-H-14 with the HPS v2.0 or v2.1 checkpoint
  (`HPS_v2_compressed.pt` / `HPS_v2.1_compressed.pt`; version from `version=`, else
  $JSBENCH_HPS_VERSION, else v2.1, the default of hpsv2's benchmark evaluation), score = 100 *
  cosine(image, prompt), the scale of hpsv2's benchmark tables. The checkpoint comes from
  `checkpoint=`, $JSBENCH_HPS_CHECKPOINT, or the Hugging Face cache (`xswu/HPSv2`); it is never
  downloaded here. The `hpsv2` package is not needed (it pins pytest and protobuf, and reloads its
  checkpoint on every call).
- `clip`: CLIPScore (Hessel et al., 2021): max(100 * cosine, 0) with open_clip ViT-L-14 / openai by
  default ($JSBENCH_CLIP_MODEL = "ARCH:TAG" or "ARCH:/path/to/weights").

open_clip itself (and the torchvision it imports) comes with the `rewards` extra; without it these
rewards fail with one line saying so.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from jsbench import JsbenchError
from jsbench.devices import AUTO, pick_device
from jsbench.rewards import Reward, register_reward

__all__ = [
    "ClipUnavailable",
    "ClipModel",
    "open_clip_available",
    "require_open_clip",
    "load_open_clip",
    "clip_from_spec",
    "resolve_hps_checkpoint",
    "load_hps",
    "as_hps",
    "hps_version",
    "resize_crop",
    "resize_pad",
    "quantize_8bit",
    "HpsReward",
    "ClipScoreReward",
    "OPENAI_MEAN",
    "OPENAI_STD",
]

REWARDS_EXTRA = "pip install 'jsbench[rewards]'"
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
HPS_REPO = "xswu/HPSv2"
HPS_FILES = {"v2.0": "HPS_v2_compressed.pt", "v2.1": "HPS_v2.1_compressed.pt"}  # hpsv2's hps_version_map
HPS_ALIASES = {"v2": "v2.0", "2": "v2.0", "2.0": "v2.0", "2.1": "v2.1"}
DEFAULT_HPS_VERSION = "v2.1"
HPS_ARCH = "ViT-H-14"
DEFAULT_CLIP = "ViT-L-14:openai"


class ClipUnavailable(JsbenchError):
    """open_clip or a model's weights are missing; the message says what and how to get it."""


def open_clip_available() -> tuple[bool, str]:
    """(True, "") when open_clip imports here, else (False, why)."""
    try:
        import open_clip  # noqa: F401
    except Exception as exc:  # ImportError, or torchvision failing to load against this torch
        return False, f"{type(exc).__name__}: {exc}".splitlines()[0]
    return True, ""


def require_open_clip():
    ok, why = open_clip_available()
    if not ok:
        raise ClipUnavailable(f"open_clip is not usable here ({why}); install the rewards extra: {REWARDS_EXTRA}")
    import open_clip

    return open_clip


PREPROCESSINGS = ("crop", "pad")


def quantize_8bit(x: torch.Tensor) -> torch.Tensor:
    """Round [0, 1] images to 8 bits as diffusers' `numpy_to_pil` does (clip, x 255, round), back in [0, 1]."""
    return x.clamp(0.0, 1.0).mul(255.0).round().div(255.0)


def resize_crop(x: torch.Tensor, size: int) -> torch.Tensor:
    """open_clip's evaluation transform: short side to `size` (bicubic, antialiased), centre crop, clamp."""
    h, w = x.shape[-2:]
    scale = size / min(h, w)
    nh, nw = max(size, round(h * scale)), max(size, round(w * scale))
    if (nh, nw) != (h, w):
        x = F.interpolate(x, size=(nh, nw), mode="bicubic", align_corners=False, antialias=True)
    top, left = (nh - size) // 2, (nw - size) // 2
    return x[..., top : top + size, left : left + size].clamp(0.0, 1.0)


def resize_pad(x: torch.Tensor, size: int) -> torch.Tensor:
    """hpsv2's ResizeMaxSize: long side to `size` (bicubic, antialiased, no clamp), zero-pad to size x size.

    New sides are Python's round(side * size / long side); the padding is split floor-left/top, the
    remainder right/bottom. hpsv2 skips both steps when the long side already equals `size`, which
    leaves a non-square tensor its ViT cannot take; here such images are padded all the same.
    """
    h, w = x.shape[-2:]
    scale = size / float(max(h, w))
    nh, nw = round(h * scale), round(w * scale)
    if (nh, nw) != (h, w):
        x = F.interpolate(x, size=(nh, nw), mode="bicubic", align_corners=False, antialias=True)
    pad_h, pad_w = size - nh, size - nw
    return F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2), value=0.0)


class ClipModel:
    """A CLIP-like model with its tokenizer and a torch preprocessing of [B, 3, H, W] images in [0, 1].

    `model` needs `encode_image(pixels)` and `encode_text(tokens)`; `tokenizer(list[str])` returns a
    LongTensor of token ids. Features come back L2-normalised in float32. `resize` picks the
    preprocessing (`crop` or `pad`, see the module notes), `quantize` rounds images to 8 bits first,
    `autocast_dtype` runs the forwards under CUDA autocast (ignored on the CPU, as in hpsv2).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Callable[[list[str]], torch.Tensor],
        image_size: int,
        mean: Sequence[float] = OPENAI_MEAN,
        std: Sequence[float] = OPENAI_STD,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        resize: str = "crop",
        quantize: bool = False,
        autocast_dtype: torch.dtype | None = None,
    ):
        if resize not in PREPROCESSINGS:
            raise ValueError(f"unknown CLIP preprocessing {resize!r} (one of {', '.join(PREPROCESSINGS)})")
        self.device = pick_device(device, default=AUTO)
        self.dtype = dtype or (torch.bfloat16 if self.device.type == "cuda" else torch.float32)
        self.resize = resize
        self.quantize = quantize
        self.autocast_dtype = autocast_dtype if self.device.type == "cuda" else None
        self.model = model.to(self.device, self.dtype).eval()
        self.tokenizer = tokenizer
        self.image_size = int(image_size)
        self.mean = torch.tensor(mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self._text_cache: dict[str, torch.Tensor] = {}

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        """[B, 3, H, W] in [0, 1] -> normalised [B, 3, S, S] by this model's preprocessing (crop or pad)."""
        x = images.to(self.device, torch.float32)
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"expected images [B, 3, H, W], got {tuple(x.shape)}")
        if self.quantize:
            x = quantize_8bit(x)
        x = resize_pad(x, self.image_size) if self.resize == "pad" else resize_crop(x, self.image_size)
        return (x - self.mean) / self.std

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    @torch.no_grad()
    def image_features(self, images: torch.Tensor) -> torch.Tensor:
        with self._autocast():
            feats = self.model.encode_image(self.preprocess(images).to(self.dtype))
        return F.normalize(feats.float(), dim=-1)

    @torch.no_grad()
    def text_features(self, texts: Sequence[str]) -> torch.Tensor:
        """Normalised text features, each distinct text encoded once per model (cached)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        if missing:
            tokens = self.tokenizer(list(missing)).to(self.device)
            with self._autocast():
                feats = F.normalize(self.model.encode_text(tokens).float(), dim=-1)
            for t, f in zip(missing, feats):
                self._text_cache[t] = f
        return torch.stack([self._text_cache[t] for t in texts])

    def cosine(self, images: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """cos(image_i, text_i) for each row, [B] float32 on the CPU."""
        if images.shape[0] != len(texts):
            raise ValueError(f"{images.shape[0]} images for {len(texts)} prompts")
        return (self.image_features(images) * self.text_features(texts)).sum(-1).cpu()


# ------------------------------------------------------------------------------------------ loading

_CACHE: dict[tuple, ClipModel] = {}


def _cached(key: tuple, build: Callable[[], ClipModel]) -> ClipModel:
    if key not in _CACHE:
        _CACHE[key] = build()
    return _CACHE[key]


def _resolve_open_clip_weights(open_clip, arch: str, pretrained: str) -> str:
    """A local file for (arch, pretrained): a path as given, else open_clip's HF-hub file from the cache."""
    if Path(pretrained).expanduser().is_file():
        return str(Path(pretrained).expanduser())
    cfg = open_clip.get_pretrained_cfg(arch, pretrained)
    hub = cfg.get("hf_hub", "") if cfg else ""
    if not hub:
        raise ClipUnavailable(f"open_clip has no weights {arch}:{pretrained}; give a local file as ARCH:/path/to/weights")
    parts = hub.strip("/").split("/")
    repo_id = "/".join(parts[:2])
    names = [parts[2]] if len(parts) > 2 else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
    return _hub_file(repo_id, names, f"{arch}:{pretrained}")


def _hub_file(repo_id: str, filenames: str | Sequence[str], what: str, repo_type: str = "model") -> str:
    """A file of a Hugging Face repo from the local cache only (never downloads)."""
    from huggingface_hub import hf_hub_download

    names = [filenames] if isinstance(filenames, str) else list(filenames)
    for name in names:
        try:
            return hf_hub_download(repo_id, name, repo_type=repo_type, local_files_only=True)
        except Exception:
            continue
    raise ClipUnavailable(
        f"{what} weights ({repo_id}/{names[-1]}) are not in the local Hugging Face cache; "
        f"fetch them with `hf download {repo_id} {names[-1]}` or pass a local path"
    )


def load_open_clip(arch: str, pretrained: str | None, device=None, state_dict_path: str | None = None, dtype: torch.dtype | None = None) -> ClipModel:
    """An open_clip model as a `ClipModel`, built once per (arch, weights, device) in this process.

    `pretrained`: an open_clip tag (resolved from the local HF cache only) or a local file; None builds
    random weights (tests). `state_dict_path`: a checkpoint loaded over the model (HPS)."""
    device = pick_device(device, default=AUTO)
    key = ("open_clip", arch, pretrained, state_dict_path, str(device), str(dtype))

    def build() -> ClipModel:
        open_clip = require_open_clip()
        weights = _resolve_open_clip_weights(open_clip, arch, pretrained) if pretrained else None
        try:
            model = open_clip.create_model(arch, pretrained=weights)
        except RuntimeError as exc:
            raise ClipUnavailable(f"could not build open_clip {arch}: {str(exc).splitlines()[0]}") from None
        if state_dict_path is not None:
            state = torch.load(state_dict_path, map_location="cpu", weights_only=False)
            state = state.get("state_dict", state) if isinstance(state, dict) else state
            state = {k.removeprefix("module."): v for k, v in state.items()}
            model.load_state_dict(state)
        visual = getattr(model, "visual", None)
        size = getattr(visual, "image_size", 224)
        size = size[0] if isinstance(size, (tuple, list)) else size
        mean = getattr(visual, "image_mean", None) or OPENAI_MEAN
        std = getattr(visual, "image_std", None) or OPENAI_STD
        tokenizer = open_clip.get_tokenizer(arch)
        return ClipModel(model, tokenizer, size, mean, std, device=device, dtype=dtype)

    return _cached(key, build)


def clip_from_spec(spec: str | None = None, device=None, dtype: torch.dtype | None = None) -> ClipModel:
    """"ARCH:TAG" or "ARCH:/path/to/weights" (default $JSBENCH_CLIP_MODEL, else ViT-L-14:openai); `dtype`
    None runs bf16 on CUDA (GenEval's colour rule asks for float32)."""
    spec = spec or os.environ.get("JSBENCH_CLIP_MODEL") or DEFAULT_CLIP
    arch, sep, pretrained = spec.partition(":")
    if not sep or not arch or not pretrained:
        raise JsbenchError(f"CLIP model {spec!r} must be ARCH:TAG or ARCH:/path/to/weights, e.g. {DEFAULT_CLIP}")
    return load_open_clip(arch, pretrained, device=device, dtype=dtype)


def hps_version(version: str | None = None) -> str:
    """The HPS version, `v2.0` or `v2.1`: `version`, else $JSBENCH_HPS_VERSION, else v2.1 (`v2`, `2.0`, `2.1` also do)."""
    given = version or os.environ.get("JSBENCH_HPS_VERSION") or DEFAULT_HPS_VERSION
    canonical = HPS_ALIASES.get(given.strip().lower(), given.strip().lower())
    if canonical not in HPS_FILES:
        raise JsbenchError(f"unknown HPS version {given!r} (one of {', '.join(HPS_FILES)})")
    return canonical


def resolve_hps_checkpoint(checkpoint: str | None = None, version: str | None = None) -> str:
    """The HPS checkpoint file: `checkpoint`, else $JSBENCH_HPS_CHECKPOINT, else the HF cache (xswu/HPSv2)."""
    version = hps_version(version)
    checkpoint = checkpoint or os.environ.get("JSBENCH_HPS_CHECKPOINT")
    if checkpoint:
        if not Path(checkpoint).expanduser().is_file():
            raise ClipUnavailable(f"HPS checkpoint {checkpoint!r} not found")
        return str(Path(checkpoint).expanduser())
    try:
        return _hub_file(HPS_REPO, HPS_FILES[version], f"HPS {version}")
    except ClipUnavailable:
        raise ClipUnavailable(
            f"HPSv2 {version} weights ({HPS_REPO}/{HPS_FILES[version]}) are not in the local Hugging Face cache; fetch "
            f"them with `hf download {HPS_REPO} {HPS_FILES[version]}` or set $JSBENCH_HPS_CHECKPOINT to the file"
        ) from None


def as_hps(clip: ClipModel) -> ClipModel:
    """The same float32 network preprocessed and run as hpsv2 scores: 8-bit images, long side resized and
    zero-padded, float16 autocast on CUDA (hpsv2's precision='amp'). Shares the module, copies nothing."""
    if clip.dtype != torch.float32:
        raise ValueError(f"HPSv2 keeps float32 weights (autocast does the rest); got a {clip.dtype} model")
    return ClipModel(
        clip.model, clip.tokenizer, clip.image_size, tuple(clip.mean.flatten().tolist()), tuple(clip.std.flatten().tolist()),
        device=clip.device, dtype=torch.float32, resize="pad", quantize=True, autocast_dtype=torch.float16,
    )


def load_hps(checkpoint: str | None = None, version: str | None = None, device=None) -> ClipModel:
    """open_clip ViT-H-14 with the HPS v2.0 / v2.1 checkpoint, as hpsv2 runs it, built once per process."""
    require_open_clip()
    device = pick_device(device, default=AUTO)
    path = resolve_hps_checkpoint(checkpoint, version)
    return _cached(
        ("hps", path, str(device)),
        lambda: as_hps(load_open_clip(HPS_ARCH, None, device=device, state_dict_path=path, dtype=torch.float32)),
    )


class _ClipReward(Reward):
    """Shared body: a lazily loaded `ClipModel`, scores in batches of `batch_size`."""

    name = "clip"

    def __init__(self, loader: Callable[[], ClipModel], batch_size: int = 32):
        self._loader = loader
        self._model: ClipModel | None = None
        self.batch_size = batch_size

    @property
    def model(self) -> ClipModel:
        if self._model is None:
            self._model = self._loader()
        return self._model

    def transform(self, cosine: torch.Tensor) -> torch.Tensor:
        return 100.0 * cosine

    def __call__(self, images: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        if images.shape[0] != len(prompts):
            raise ValueError(f"{images.shape[0]} images for {len(prompts)} prompts")
        out = [
            self.model.cosine(images[i : i + self.batch_size], list(prompts[i : i + self.batch_size]))
            for i in range(0, len(prompts), self.batch_size)
        ]
        cos = torch.cat(out) if out else torch.zeros(0)
        return self.transform(cos).to(torch.float32)


class HpsReward(_ClipReward):
    """HPSv2: 100 * cosine(image, prompt) under the HPS-tuned ViT-H-14 (v2.0 or v2.1 checkpoint).

    `model` replaces the network (tests); give it hpsv2's preprocessing with `as_hps`."""

    name = "hps"

    def __init__(self, checkpoint: str | None = None, version: str | None = None, batch_size: int = 32, model: ClipModel | None = None):
        self.version = hps_version(version)
        self.checkpoint = checkpoint
        super().__init__(lambda: model or load_hps(checkpoint, self.version), batch_size)

    @property
    def id(self) -> str:
        """Which HPS scored, for result provenance: `hps-<version>:<checkpoint file, or the hub repo>`."""
        return f"hps-{self.version}:{self.checkpoint or os.environ.get('JSBENCH_HPS_CHECKPOINT') or HPS_REPO}"


class ClipScoreReward(_ClipReward):
    """CLIPScore: max(100 * cosine(image, prompt), 0)."""

    name = "clip"

    def __init__(self, spec: str | None = None, batch_size: int = 32, model: ClipModel | None = None):
        super().__init__(lambda: model or clip_from_spec(spec), batch_size)

    def transform(self, cosine: torch.Tensor) -> torch.Tensor:
        return (100.0 * cosine).clamp_min(0.0)


@register_reward("hps")
def _hps(backbone=None) -> HpsReward:
    """HPSv2 at $JSBENCH_HPS_VERSION (v2.0 or v2.1, default v2.1) from $JSBENCH_HPS_CHECKPOINT or the HF cache;
    a missing checkpoint is refused here, before training samples anything."""
    resolve_hps_checkpoint()
    return HpsReward()


@register_reward("clip")
def _clip(backbone=None) -> ClipScoreReward:
    return ClipScoreReward()

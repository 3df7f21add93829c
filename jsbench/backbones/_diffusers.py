"""Shared machinery of the real (diffusers) backbones: loading, noise, the flow-matching Euler loop.

Why our own loop rather than calling the pipeline: a diffusers pipeline runs ONE schedule for its whole
batch (the scheduler object holds it). The networks underneath do not care: the UNet and the MMDiT
transformers take a timestep per sample. So the adapters use the pipeline's components directly
(`pipe.unet` / `pipe.transformer`, `pipe.vae`, `pipe.encode_prompt`, the scheduler's *config*) and run one
batched loop in which row b follows `sigmas[b]`. Everything else copies the pipeline's arithmetic step by
step (dtype casts included), which is what lets the parity tests demand agreement to float round-off.

Loading never downloads: weights come from a local folder or the Hugging Face cache. A missing model
raises `BackboneWeightsMissing` with one line naming the id and the command that fetches it. (Set
`JSBENCH_ALLOW_DOWNLOAD=1` to let diffusers fetch instead; `HF_HUB_OFFLINE=1` always wins.)
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

import torch

from jsbench import JsbenchError
from jsbench.backbones._call_cache import ExactCallCache, call_key
from jsbench.backbones.base import DEFAULT_CEILING_STEPS, Condition, EulerStepper, sample_in_batches
from jsbench.devices import AUTO, pick_device
from jsbench.schedule import ScheduleError, check_sigmas, shift_sigmas

__all__ = [
    "BackboneWeightsMissing",
    "BackboneLoadError",
    "default_dtype",
    "load_pipeline",
    "cached_hub_file",
    "DiffusersBackbone",
    "FlowMatchBackbone",
]


class BackboneWeightsMissing(JsbenchError):
    """The weights of a real backbone are neither in a local folder nor in the Hugging Face cache."""


class BackboneLoadError(JsbenchError):
    """Weights were found but are not the pipeline this backbone needs."""


_TRUE = {"1", "true", "yes", "on"}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA (what these models are served in), fp32 elsewhere (CPU bf16 is slow and inexact)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def _fetch_hint(model_id: str) -> str:
    return f"fetch them with `hf download {model_id}` (or `huggingface-cli download {model_id}`; gated models need `hf auth login` first), or pass --model /path/to/pipeline"


def _is_hub_id(model: str) -> bool:
    """Hub ids are "owner/name"; anything else that is not an existing folder is a path that is missing."""
    return not model.startswith((".", "/", "~")) and model.count("/") == 1 and "\\" not in model


#: the `--model` value that builds the backbone's whole published architecture with random weights, on the device
#: it runs on (jsbench.backbones.full_size): seconds and memory at real size where no weights can be downloaded
FULL_SIZE_RANDOM = "full-size-random"


def load_pipeline(
    pipeline_cls, model: str, *, backbone: str, device: torch.device, dtype: torch.dtype, default_id: str | None = None,
    hint: str | None = None, offload: bool = False, shared: dict | None = None,
):
    """`pipeline_cls.from_pretrained(model)` from a local folder or the HF cache, never from the network.

    `model` is a hub id ("owner/name", looked up in the cache) or a folder written by `save_pretrained`.
    Returns (pipeline on `device` in `dtype`, sampling defaults read from an optional `jsbench.json`).
    `offload` (see `offload_mode`): "model", the networks stay on the CPU and diffusers'
    `enable_model_cpu_offload` moves each one to `device` while it runs (one network resident at a time);
    "sequential", diffusers' `enable_sequential_cpu_offload` (one layer at a time: for cards that cannot hold
    the transformer, much slower); "text", everything on `device` except the text encoders, which the
    backbone moves there only to encode (T5-XXL's 8.9 GiB is not resident while sampling). Set up once here.
    """
    offload = offload_mode(offload, backbone)
    path = Path(model).expanduser()
    offline = _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE")
    allow_download = _env_flag("JSBENCH_ALLOW_DOWNLOAD") and not offline
    extras: dict[str, Any] = {}
    absent: dict[str, None] = {}
    if path.is_dir():
        index = path / "model_index.json"
        if not index.is_file():
            raise BackboneWeightsMissing(f"{backbone}: {path} is not a diffusers pipeline folder (no model_index.json)")
        source = str(path)
        entries = json.loads(index.read_text())
        class_name = entries.get("_class_name")
        # a component the folder lists as [null, null] (e.g. SD3 saved without T5) must be passed as None
        absent = {k: None for k, v in entries.items() if not k.startswith("_") and v == [None, None]}
        if (path / "jsbench.json").is_file():
            extras = json.loads((path / "jsbench.json").read_text())
    else:
        local_hint = hint or f"fetch one with `hf download {default_id or '<hub id>'} --local-dir {model}`"
        if not _is_hub_id(model):
            raise BackboneWeightsMissing(f"{backbone}: no pipeline folder at {model}: the path does not exist; {local_hint}")
        cached = None if allow_download else cached_hub_file(model, "model_index.json")
        if not allow_download and model != default_id and cached is None:
            # "models/flux-dev" reads like a hub id, but one that is not cached is far more often a folder
            # typed relative to the wrong directory: say the path does not exist, not `hf download models/flux-dev`
            raise BackboneWeightsMissing(
                f"{backbone}: --model {model}: the path does not exist (in {Path.cwd()}) and no hub model {model} is in "
                f"the Hugging Face cache; {local_hint}"
            )
        source = model
        class_name = None
        if not allow_download:
            if cached is None:
                raise BackboneWeightsMissing(
                    f"{backbone}: weights for {model} are not in the Hugging Face cache ({_hub_cache()}); {_fetch_hint(model)}"
                )
            class_name = json.loads(Path(cached).read_text()).get("_class_name")
    if class_name is not None and class_name != pipeline_cls.__name__:
        raise BackboneLoadError(f"{backbone}: {model} holds a {class_name}, not the {pipeline_cls.__name__} this backbone runs")
    try:
        pipe = pipeline_cls.from_pretrained(source, **{_dtype_kwarg(): dtype}, **absent, **(shared or {}), local_files_only=not allow_download)
    except (OSError, ValueError, EnvironmentError) as exc:  # incomplete cache, missing component files, ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if hint is None:
            hint = f"re-create it with `hf download {default_id or '<hub id>'} --local-dir {path}`" if path.is_dir() else _fetch_hint(model)
        raise BackboneWeightsMissing(f"{backbone}: could not load {model} ({first[:160]}); {hint}") from exc
    pipe.set_progress_bar_config(disable=True)
    # Without `accelerate`, diffusers 0.42 leaves some models (SD3's transformer) wholly in the checkpoint's
    # dtype although asked for another. Cast a module only when *none* of its floating parameters has the
    # requested dtype: a partly-cast module is mixed precision on purpose (e.g. T5's fp32 `wo` in fp16).
    for module in pipe.components.values():
        if isinstance(module, torch.nn.Module):
            floats = [p.dtype for p in module.parameters() if p.is_floating_point()]
            if floats and dtype not in floats:
                with _quiet_diffusers():  # its "should be kept in float32: []" warning says nothing here
                    module.to(dtype=dtype)
    _place(pipe, offload, backbone=backbone, device=device)
    return pipe, extras


def full_size_random_pipeline(kind: str, *, backbone: str, device: torch.device, dtype: torch.dtype, offload=None):
    """(backbone `kind`'s whole pipeline at full size with random weights, no sampling extras) for
    `--model full-size-random`: created directly on `device` in `dtype`, or, under a CPU-offload mode, on the
    CPU, where those modes keep the networks between calls (`full_size.full_size_pipeline`)."""
    from jsbench.backbones.full_size import FULL_SIZE, full_size_pipeline, full_size_owner

    offload = offload_mode(offload, backbone)
    owner = full_size_owner(kind)
    if owner is None:
        raise BackboneLoadError(f"{backbone}: --model {FULL_SIZE_RANDOM} needs a published size; {', '.join(FULL_SIZE)} have one")
    on_cpu = offload in ("model", "sequential", "text")
    pipe = full_size_pipeline(owner, "cpu" if on_cpu else device, dtype)
    if offload == "text":  # the networks but the text encoders go to the device; they stay on the CPU
        for name, module in pipe.components.items():
            if isinstance(module, torch.nn.Module) and module not in text_encoders(pipe):
                module.to(device)
        return pipe, {}
    _place(pipe, offload, backbone=backbone, device=device)
    return pipe, {}


def _place(pipe, offload: str | None, *, backbone: str, device: torch.device) -> None:
    """Put `pipe`'s networks where offload mode `offload` keeps them (see `load_pipeline`)."""
    if offload in ("model", "sequential"):
        try:
            if offload == "model":
                pipe.enable_model_cpu_offload(device=device)
            else:
                pipe.enable_sequential_cpu_offload(device=device)
        except (ImportError, RuntimeError, ValueError, TypeError) as exc:  # TypeError: accelerate vs torch versions
            raise BackboneLoadError(f"{backbone}: --offload-mode {offload} failed ({str(exc).splitlines()[0][:160]})") from None
    else:
        pipe.to(device)
        if offload == "text":
            for module in text_encoders(pipe):
                module.to("cpu")


#: --offload-mode values (`load_pipeline`); `--offload` is "model"
OFFLOAD_MODES = ("text", "model", "sequential")


def offload_mode(offload, backbone: str = "backbone") -> str | None:
    """`offload` as one of OFFLOAD_MODES or None: True is "model" (the `--offload` flag), False/None none."""
    if offload is None or offload is False:
        return None
    if offload is True:
        return "model"
    if offload not in OFFLOAD_MODES:
        raise BackboneLoadError(f"{backbone}: unknown --offload-mode {offload!r}: use {', '.join(OFFLOAD_MODES)}")
    return offload


def pipeline_folder(model: str) -> Path | None:
    """The folder holding `model`'s model_index.json: the folder itself, or its snapshot in the HF cache."""
    path = Path(model).expanduser()
    if (path / "model_index.json").is_file():
        return path
    cached = cached_hub_file(model, "model_index.json") if _is_hub_id(model) else None
    return Path(cached).parent if cached else None


def _component_digest(folder: Path) -> tuple:
    """(file, content digest) for every file of a component folder. A file of the HF cache is a link to a blob
    named by its content hash (sha256 for weights), which is read instead of hashing gigabytes."""
    import hashlib

    out = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        if f.is_symlink():
            digest = Path(os.readlink(f)).name
        else:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 24), b""):
                    h.update(block)
            digest = h.hexdigest()
        out.append((str(f.relative_to(folder)), digest))
    return tuple(out)


#: components a second pipeline may take from a loaded one when their files are identical (not the denoiser)
SHAREABLE = ("text_encoder", "text_encoder_2", "text_encoder_3", "tokenizer", "tokenizer_2", "tokenizer_3", "vae")


def identical_components(pipe, model: str, other_model: str) -> dict:
    """The components of the loaded `pipe` (from `model`) whose class and files `other_model` has too: what a
    second pipeline (a distilled row: FLUX.1-schnell beside -dev) can share instead of holding a copy."""
    a, b = pipeline_folder(model), pipeline_folder(other_model)
    if a is None or b is None:
        return {}
    ia, ib = json.loads((a / "model_index.json").read_text()), json.loads((b / "model_index.json").read_text())
    shared = {}
    for name in SHAREABLE:
        if name in ia and ia.get(name) == ib.get(name) and getattr(pipe, name, None) is not None \
                and (a / name).is_dir() and (b / name).is_dir() and _component_digest(a / name) == _component_digest(b / name):
            shared[name] = getattr(pipe, name)
    return shared


def text_encoders(pipe) -> list[torch.nn.Module]:
    """The pipeline's text encoders (text_encoder, text_encoder_2, text_encoder_3 where present)."""
    return [m for name, m in pipe.components.items() if name.startswith("text_encoder") and isinstance(m, torch.nn.Module)]


class _quiet_diffusers:
    def __enter__(self):
        from diffusers.utils import logging as dlog

        self._level = dlog.get_verbosity()
        dlog.set_verbosity_error()

    def __exit__(self, *exc):
        from diffusers.utils import logging as dlog

        dlog.set_verbosity(self._level)
        return False


def _dtype_kwarg() -> str:
    """diffusers renamed from_pretrained's `torch_dtype` to `dtype` (0.36+); use whichever it takes."""
    try:
        from diffusers.utils.deprecation_utils import _resolve_dtype  # noqa: F401

        return "dtype"
    except ImportError:
        return "torch_dtype"


def _hub_cache() -> str:
    try:
        from huggingface_hub import constants

        return str(constants.HF_HUB_CACHE)
    except Exception:  # pragma: no cover
        return "~/.cache/huggingface/hub"


def cached_hub_file(repo_id: str, filename: str) -> str | None:
    """Path of `filename` of `repo_id` in the HF cache, or None; touches no network."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return None
    try:
        hit = try_to_load_from_cache(repo_id, filename)
    except Exception:  # invalid repo id and the like
        return None
    return hit if isinstance(hit, str) else None


def seeded_normal(seeds: Sequence[int], shape: Sequence[int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[B, *shape] on CPU, row b drawn in `dtype` from its own `torch.Generator().manual_seed(seeds[b])`.

    The same draw as a pipeline given `generator=[torch.Generator().manual_seed(s) for s in seeds]`
    (diffusers' `randn_tensor` draws a list of generators one row at a time, on the generators' CPU, in
    the latents' dtype), independent of batch composition and of the device the backbone runs on.
    """
    rows = [torch.randn((1, *shape), generator=torch.Generator().manual_seed(int(s)), dtype=dtype) for s in seeds]
    return torch.cat(rows, dim=0)


def mul_as_scheduler(rows: torch.Tensor, t: torch.Tensor, scalar_first: bool = True) -> torch.Tensor:
    """`rows * t` computed the way a scheduler's `sigma * t` (or `t * sigma`) is, sigma a 0-dim float32 CPU tensor.

    Schedulers multiply model-dtype tensors by one float32 sigma (or dt) at a time. Torch does not promote
    for a 0-dim operand, so the product has t's dtype, and how the scalar enters depends on where it lives
    and on the operand order: a CPU scalar times a CUDA tensor is read in full precision (one rounding of
    the product); on a CPU tensor only a scalar in *second* position is (`t * sigma`), while a
    first-position scalar (`sigma * t`) is first rounded to t's dtype. We hold a sigma per row
    ([B, 1, ...] float32), which *would* promote, so the rules are reproduced explicitly. In float32 they
    all give the same product.

    Where the sigmas live differs by scheduler: EulerDiscreteScheduler (SD-XL) keeps them on the CPU, so on
    CUDA its products are the full-precision ones computed here. FlowMatchEulerDiscreteScheduler (SD3.5,
    Flux) keeps the sigmas `set_timesteps` makes on the pipeline's device, so on CUDA in bf16 the pipeline
    rounds dt to bf16 before `dt * v` while this function (CUDA branch) does not: jsbench's step is the
    more exact one and may differ from the pipeline's by one bf16 ulp of dt per step. The parity with the
    diffusers pipelines is therefore exact on the CPU only (where both round the same way); on CUDA it holds
    to the bf16 tolerance of the parity tests.
    """
    if t.dtype == torch.float32:
        return rows * t
    if t.device.type == "cpu" and scalar_first:
        return rows.to(t.dtype) * t
    return (rows * t.to(torch.float32)).to(t.dtype)


def div_as_scheduler(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """`t / rows` as a scheduler's `t / sigma` (sigma a 0-dim float32 CPU tensor) is computed.

    CUDA divides by a CPU scalar as a multiplication by its float32 reciprocal (any dtype); the CPU
    kernel divides in float32 and rounds once to t's dtype.
    """
    if t.device.type == "cuda":
        return (t.to(torch.float32) * (1.0 / rows)).to(t.dtype)
    if t.dtype == torch.float32:
        return t / rows
    return (t.to(torch.float32) / rows).to(t.dtype)


class DiffusersBackbone:
    """What every diffusers-backed adapter shares. Subclasses set the class attributes and the hooks.

    Attributes a user may change after loading: `height`, `width` (pixels), `guidance_scale`,
    `decode_chunk` (images per VAE call).

    Memory (see docs/real-backbones.md): a subclass declares `decode_chunk`, and the rows per
    sampler call in training (`train_batch`) and in evaluation (`eval_batch`, the default `--batch-size`),
    sized so that one call fits next to the weights on an 80 GB GPU at the default resolution in bf16.
    """

    name: str = ""
    default_model_id: str = ""
    pipeline_class_name: str = ""
    default_steps: int = 28
    max_steps: int = 1000
    default_guidance: float = 1.0
    weights_hint: str | None = None  # how to restore broken weights, when not `hf download <default id>`
    decode_chunk: int = 4  # images per VAE decode call (a 1024^2 decode peaks at ~1.4 GiB per image in bf16)
    train_batch: int = 16  # rows per sampler call in a training update (B*K rows are split into such calls)
    eval_batch: int = 16  # rows per sampler call in evaluation (the default --batch-size)
    ceiling_steps: int = DEFAULT_CEILING_STEPS  # steps of the `ceiling` reference row
    draws_embedded_world: bool = False  # real images: the real suites score them (scenes-dit sets True)
    draws_text: bool = True  # a text-to-image model may draw quoted text (scenes-dit, trained on scenes, sets False)
    geneval_world = None  # no embedded world of its own
    velocity = None  # FlowMatchBackbone's: the transformer's velocity (SD-XL's clock is not flow time: none)
    velocity_dtype = None
    ays_schedule = None  # no Align Your Steps schedule in diffusers' AysSchedules (SD-XL sets its key)
    # clock_kind: each subclass declares its own ("flow": FlowMatchBackbone, "discrete": SD-XL)
    # Sizes outside the protocol, read by the test and bench harness (`jsbench.backbones.tiny`, scripts/):
    #: the sampling settings (height, width, T5 length) of the adapter's tiny pipeline, written to its jsbench.json.
    #: A backbone has a tiny pipeline (a `tiny_pipeline` classmethod) when its OWN class body sets this (a subclass
    #: that only inherits it, sd35-large, scenes-dit, is the same pipeline, not another tiny kind).
    tiny_sampling: dict | None = None
    #: the full-size network for FLOP estimates on the meta device (scripts/bench_backbones.py): its diffusers class
    #: ("network") and published config.json ("config"), latent channels, CLIP tokens in the text sequence
    #: ("clip_len"), text width ("text_dim"), pooled width ("pooled") and rows per network call per image
    #: ("cfg_batch": 2 under classifier-free guidance). Counted where the class's own body sets it.
    full_size: dict | None = None
    timestep_distilled: bool = False  # a few-step sampler (Flux-Schnell): benchmarks run it at most at default_steps
    max_sequence_length: int = 0  # T5 tokens of the text sequence (0: no T5, SD-XL; FlowMatchBackbone sets its own)
    #: MiB of exact call results kept between calls (`_call_cache.ExactCallCache`; 0: none): the encodings of whole
    #: prompt batches and, on the flow backbones, the first sampler step's velocity of whole batches. Evaluation
    #: samples the same batches once per schedule row, so each row after the first reuses both; set where they
    #: are small beside the sampler's work (scenes-dit), left off where one batch's would be big (a 1024^2 model's)
    call_cache_mib: int = 0

    def __init__(
        self, model: str | None = None, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
        offload: bool = False, decode_chunk: int | None = None, guidance: float | None = None, share_with=None,
    ):
        import diffusers

        self.device = pick_device(device, default=AUTO)  # CUDA when there is one
        self.dtype = dtype or default_dtype(self.device)
        self.model_id = model or self.default_model_id
        self.offload = offload_mode(offload, self.name)  # None, "text", "model" or "sequential"
        self._prompt_cache: dict[str, Condition] = {}  # "text" offload: prompt -> its encoding, on the CPU
        self._call_cache = ExactCallCache(self.call_cache_mib << 20) if self.call_cache_mib > 0 else None
        if decode_chunk is not None:
            self.decode_chunk = int(decode_chunk)
        pipeline_cls = getattr(diffusers, self.pipeline_class_name)
        # `share_with`: a loaded diffusers backbone whose identical text encoders, tokenizers and VAE this one
        # uses instead of loading copies (compare's distilled row); only where both keep them on one device
        self.shared: list[str] = []
        shared = {}
        if share_with is not None and getattr(share_with, "pipe", None) is not None and share_with.dtype == self.dtype \
                and share_with.device == self.device and share_with.offload == self.offload and self.offload in (None, "text"):
            shared = identical_components(share_with.pipe, share_with.model_id, self.model_id)
            self.shared = sorted(shared)
        if self.model_id == FULL_SIZE_RANDOM:  # the published architecture with random weights: timing, memory
            self.pipe, extras = full_size_random_pipeline(self.name, backbone=self.name, device=self.device, dtype=self.dtype,
                                                          offload=self.offload)
        else:
            self.pipe, extras = load_pipeline(
                pipeline_cls, self.model_id, backbone=self.name, device=self.device, dtype=self.dtype,
                default_id=self.default_model_id, hint=self.weights_hint, offload=self.offload, shared=shared,
            )
        self.vae = self.pipe.vae
        self.vae_scale_factor = 2 ** (len(self.vae.config.block_out_channels) - 1)
        h, w = self._default_resolution()
        self.height = int(extras.get("height", h))
        self.width = int(extras.get("width", w))
        self.max_sequence_length = int(extras.get("max_sequence_length", self.max_sequence_length))
        self.guidance_scale = float(extras.get("guidance_scale", self.default_guidance))  # the pipeline's own
        self._check_variant()
        if guidance is not None:
            if not self.takes_guidance():
                raise BackboneLoadError(f"{self.name}: {self.model_id} takes no guidance scale; drop --guidance")
            self.guidance_scale = float(guidance)
        for module in self._networks():
            module.requires_grad_(False)
            module.eval()

    # ---- hooks --------------------------------------------------------------------------------------
    def _default_resolution(self) -> tuple[int, int]:
        raise NotImplementedError

    def _check_variant(self) -> None:
        """Refuse (BackboneLoadError, one line) weights of another variant than the backbone's name says."""

    def takes_guidance(self) -> bool:
        """Whether the denoiser uses a guidance scale (CFG or a guidance embedding)."""
        return True

    def recorded_guidance(self) -> float | None:
        """The guidance scale sampled with, for records and manifests; None where the model takes none."""
        return self.guidance_scale if self.takes_guidance() else None

    def shift_mu(self) -> float | None:
        """The resolution-dependent shift mu the scheduler applies at the current size (Flux-Dev's dynamic
        shifting), None where its shift is static or there is none."""
        return None

    def _networks(self) -> list[torch.nn.Module]:
        return [m for m in self.pipe.components.values() if isinstance(m, torch.nn.Module)]

    def net_parameters(self):
        """Every parameter of every network of the pipeline (text encoders, denoiser, VAE)."""
        for module in self._networks():
            yield from module.parameters()

    @property
    def latent_channels(self) -> int:
        return int(self.vae.config.latent_channels)

    def _noise_shape(self) -> tuple[int, int, int]:
        """The pipeline's unpacked latent shape [C, h, w] at the current resolution."""
        return (self.latent_channels, self.height // self.vae_scale_factor, self.width // self.vae_scale_factor)

    def _to_layout(self, latents: torch.Tensor) -> torch.Tensor:
        """[B, C, h, w] -> the layout the sampler integrates (identity except for Flux's packing)."""
        return latents

    # ---- protocol -----------------------------------------------------------------------------------
    @property
    def latent_shape(self) -> tuple[int, ...]:
        return tuple(self._to_layout(torch.empty((1, *self._noise_shape()), device="meta")).shape[1:])

    def initial_noise(self, seeds: Sequence[int]) -> torch.Tensor:
        """[B, *latent_shape] standard normal, one CPU generator per seed (see `seeded_normal`)."""
        x = seeded_normal(seeds, self._noise_shape(), self.dtype)
        return self._to_layout(x).to(self.device)

    @torch.no_grad()
    def sample(self, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor) -> torch.Tensor:
        """Images [B, 3, H, W] float32 in [0, 1]: one batched sampler loop, then `decode_chunk` rows per VAE call.

        Images come back on the backbone's device, except under `offload`, where they are gathered on the CPU
        (a 1024^2 float32 image is 12 MiB: 512 of them would not fit beside a 24 GB GPU's weights). The
        offload hooks are set up once, at load: calling the pipeline's `maybe_free_model_hooks` here would
        re-install them and move every network back to the CPU after each sampler chunk.
        """
        return self._decode_all(self.sample_latents(x_T, cond, sigmas))

    @torch.no_grad()
    def _decode_all(self, latents: torch.Tensor) -> torch.Tensor:
        """`sample`'s decoding: `decode_chunk` rows per VAE call (gathered on the CPU under offload)."""
        chunk = max(1, int(self.decode_chunk))
        parts = []
        for start in range(0, latents.shape[0], chunk):
            image = self.decode(latents[start : start + chunk])
            parts.append(image.cpu() if self.offload else image)
        return torch.cat(parts, dim=0)

    def encode(self, prompts: Sequence[str]) -> Condition:
        """The adapter's `_encode_prompts`. Under "text" offload the text encoders are moved to the device for
        the call and back, and each prompt is encoded once: its embeddings are cached on the CPU (compare
        samples every row on the same prompts), in one batch per call for the prompts not seen yet."""
        prompts = list(prompts)
        if self.offload != "text":
            if self._call_cache is None:
                return self._encode_prompts(prompts)
            # the whole batch is the key: an encoder's row may differ in its last bits in a batch of another size
            key = call_key((), text_encoders(self.pipe), ("encode", tuple(prompts), self.guidance_scale, self.max_sequence_length, str(self.device), str(self.dtype)))
            cached = self._call_cache.get_or_compute(key, lambda: self._encode_prompts(prompts))
            # a Condition of its own (its lists and dict may be changed by the caller); the tensors are shared, read only
            return Condition(list(cached.prompts), cached.pooled, dict(cached.tensors), cached.tokens, cached.token_mask)
        missing = [p for p in dict.fromkeys(prompts) if p not in self._prompt_cache]
        if missing:
            encoders = text_encoders(self.pipe)
            try:
                for module in encoders:
                    module.to(self.device)
                fresh = self._encode_prompts(missing)
            finally:
                for module in encoders:
                    module.to("cpu")
            for i, prompt in enumerate(missing):
                row = fresh.take([i])
                self._prompt_cache[prompt] = Condition([prompt], row.pooled.cpu(), {k: v.cpu() for k, v in row.tensors.items()},
                                                       row.tokens.cpu(), row.token_mask.cpu())
        rows = [self._prompt_cache[p] for p in prompts]
        return Condition(
            prompts=prompts,
            pooled=torch.cat([r.pooled for r in rows]).to(self.device),
            tensors={k: torch.cat([r.tensors[k] for r in rows]).to(self.device) for k in rows[0].tensors},
            tokens=torch.cat([r.tokens for r in rows]).to(self.device),
            token_mask=torch.cat([r.token_mask for r in rows]).to(self.device),
        )

    def _encode_prompts(self, prompts: list[str]) -> Condition:
        raise NotImplementedError

    @property
    def token_dim(self) -> int:
        """Width of the per-token embeddings the policy reads (`Condition.tokens`): the denoiser's text width."""
        raise NotImplementedError

    def _token_mask(self, tokenizer, prompts: list[str], length: int) -> torch.Tensor:
        """[B, length] bool, True on the tokens `tokenizer` gives the prompts (padded and cut to `length` as
        the pipeline's encode_prompt does); all False where the pipeline has no such encoder."""
        if tokenizer is None:
            return torch.zeros(len(prompts), length, dtype=torch.bool, device=self.device)
        ids = tokenizer(prompts, padding="max_length", max_length=length, truncation=True, return_tensors="pt")
        return ids.attention_mask.to(self.device, torch.bool)

    def _check_batch(self, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor) -> torch.Tensor:
        if x_T.shape[0] != len(cond) or sigmas.shape[0] != x_T.shape[0]:
            raise ScheduleError(
                f"batch mismatch: x_T has {x_T.shape[0]} rows, condition {len(cond)}, sigmas {sigmas.shape[0]}"
            )
        if tuple(x_T.shape[1:]) != self.latent_shape:
            raise ScheduleError(f"x_T rows have shape {tuple(x_T.shape[1:])}, {self.name} expects {self.latent_shape}")
        if sigmas.dtype not in (torch.float32, torch.float64):
            # a schedule rounded to the model's dtype is not the schedule the policy drew (in bf16, neighbouring
            # sigmas near 1 merge): schedules stay float32/float64 up to here, the adapter alone converts them
            raise ScheduleError(f"{self.name}: sigmas must be float32 or float64, got {sigmas.dtype}")
        sigmas = sigmas.to(self.device, torch.float32)
        check_sigmas(sigmas, free_start=self.clock_kind == "flow")  # flow time: x_T enters at sigma_0
        steps = sigmas.shape[1] - 1
        if steps > self.max_steps:
            raise ScheduleError(f"{self.name} accepts at most {self.max_steps} steps, got {steps}")
        return sigmas

    @staticmethod
    def _postprocess(image: torch.Tensor) -> torch.Tensor:
        """VaeImageProcessor.postprocess(output_type="pt"): [-1, 1] -> [0, 1], as float32 for the rewards."""
        return (image * 0.5 + 0.5).clamp(0, 1).float()


def _scheduler_shift(config, mu: float | None) -> float:
    """The factor s of FlowMatchEulerDiscreteScheduler's shift, written as t' = s / (s + (1/t - 1)).

    Static shift: s = `shift`. Dynamic (Flux-Dev, resolution dependent): s = exp(mu) for the
    "exponential" type, s = mu for "linear". All three are `schedule.shift_sigmas(t, s)`.
    """
    if config.get("use_dynamic_shifting", False):
        if mu is None:
            raise ValueError("dynamic shifting needs mu")
        return math.exp(mu) if config.get("time_shift_type", "exponential") == "exponential" else float(mu)
    return float(config.get("shift", 1.0))


def calculate_shift(image_seq_len: int, base_seq_len=256, max_seq_len=4096, base_shift=0.5, max_shift=1.15) -> float:
    """diffusers' `calculate_shift` (Flux/SD3): mu linear in the number of image tokens."""
    m = (max_shift - base_shift) / (max_seq_len - base_seq_len)
    b = base_shift - m * base_seq_len
    return image_seq_len * m + b


class FlowMatchBackbone(DiffusersBackbone):
    """Flow-matching backbones (SD3.5, Flux): x_t = (1 - t) x_0 + t eps, Euler on the predicted velocity.

    The clock the policy speaks is the flow time the transformer is actually evaluated at: the
    scheduler's sigmas *after* its shift (SD3's static shift 3, Flux-Dev's resolution-dependent mu).
    `default_sigmas` therefore returns the shifted schedule the pipeline runs, and `sample` runs the
    given sigmas as they are: no shift is applied on top. (A diffusers pipeline given `sigmas=` would
    shift them again; `pipeline_sigmas` undoes that for anyone who wants the pipeline to run ours.)
    """

    max_sequence_length = 512
    clock_kind = "flow"  # the policy's sigma is the flow time the transformer is evaluated at
    velocity_dtype = torch.float32  # the Euler state is upcast to float32 each step (`sample_latents`)

    def _image_seq_len(self, x_T: torch.Tensor | None = None) -> int:
        raise NotImplementedError

    def _mu(self) -> float | None:
        cfg = self.pipe.scheduler.config
        if not cfg.get("use_dynamic_shifting", False):
            return None
        return calculate_shift(
            self._image_seq_len(),
            cfg.get("base_image_seq_len", 256),
            cfg.get("max_image_seq_len", 4096),
            cfg.get("base_shift", 0.5),
            cfg.get("max_shift", self._default_max_shift),
        )

    _default_max_shift = 1.15

    def shift_mu(self) -> float | None:
        return self._mu()

    def _fresh_scheduler(self):
        from diffusers import FlowMatchEulerDiscreteScheduler

        return FlowMatchEulerDiscreteScheduler.from_config(self.pipe.scheduler.config)

    def _set_default_timesteps(self, scheduler, steps: int, mu: float | None) -> None:
        """Exactly what the pipeline's __call__ does to its scheduler for `num_inference_steps=steps`."""
        raise NotImplementedError

    def default_sigmas(self, steps: int, x_T: torch.Tensor) -> torch.Tensor:
        """[B, N+1] float32: the sigmas the pipeline itself runs for N steps (shift/mu applied), ending at 0.

        x_T only sets the batch size: the shift depends on the backbone's resolution (`height`, `width`).

        Read off a fresh scheduler built from the pipeline's scheduler config and set up the way the
        pipeline's __call__ sets it up, so config details (shift, dynamic shifting, terminal stretch)
        are reproduced rather than re-derived.
        """
        if not isinstance(steps, int) or not 1 <= steps <= self.max_steps:
            raise ScheduleError(f"{self.name}: steps must be an integer in [1, {self.max_steps}], got {steps!r}")
        scheduler = self._fresh_scheduler()
        self._set_default_timesteps(scheduler, steps, self._mu())
        row = scheduler.sigmas.to(torch.float32).clone()
        if row.shape[0] != steps + 1 or abs(row[0].item() - 1.0) > 1e-6 or row[-1].item() != 0.0:
            raise ScheduleError(f"{self.name}: the pipeline's default schedule does not run from 1 to 0: {row.tolist()}")
        row[0] = 1.0
        return row.to(self.device).expand(x_T.shape[0], -1).clone()

    def pipeline_sigmas(self, sigmas_row: torch.Tensor) -> list[float]:
        """The `sigmas=` to hand the diffusers pipeline so that, after its shift, it runs `sigmas_row`.

        The scheduler maps t -> s / (s + (1/t - 1)); its inverse is the same map with 1/s. Only the N
        non-terminal sigmas are passed (the scheduler appends 0).
        """
        cfg = self.pipe.scheduler.config
        if cfg.get("shift_terminal") or cfg.get("use_karras_sigmas") or cfg.get("use_exponential_sigmas") or cfg.get("use_beta_sigmas"):
            raise ScheduleError(f"{self.name}: this scheduler config re-maps custom sigmas in a way that cannot be undone")
        s = _scheduler_shift(cfg, self._mu())
        row = sigmas_row.to(torch.float64)[:-1]
        return shift_sigmas(row, 1.0 / s).tolist()

    # ---- the loop -----------------------------------------------------------------------------------
    def _prepare(self, x: torch.Tensor, cond: Condition) -> dict:
        """Per-call constants of the loop (position ids, guidance tensors), built once, not per step."""
        return {}

    def _velocity(self, x: torch.Tensor, sigma_t: torch.Tensor, cond: Condition, ctx: dict) -> torch.Tensor:
        """The model's velocity at flow time sigma_t[b] for every row (guidance included)."""
        raise NotImplementedError

    def _first_velocity(self, x: torch.Tensor, sigma_t: torch.Tensor, cond: Condition, ctx: dict) -> torch.Tensor:
        """`_velocity` for the sampler's first step, from the call cache where the backbone keeps one.

        The first step reads only the initial noise, the starting levels and the prompts, never the rest of
        the schedule: every schedule row evaluated on the same batch that starts at the same levels (sigma 1
        for all but free-start rows) makes this very call, so it is made once. Keyed by the bytes of all it
        reads (`call_key`), the whole batch at once: the result is the one the call returns.
        """
        if self._call_cache is None:
            return self._velocity(x, sigma_t, cond, ctx)
        names = sorted(ctx)
        tensors = [x, sigma_t, *(cond.tensors[k] for k in sorted(cond.tensors)), *(ctx[k] for k in names if isinstance(ctx[k], torch.Tensor))]
        settings = ("first velocity", sorted(cond.tensors), names, [repr(ctx[k]) for k in names if not isinstance(ctx[k], torch.Tensor)],
                    self.guidance_scale, str(self.device), str(self.dtype))
        key = call_key(tensors, [self.pipe.transformer], settings)
        return self._call_cache.get_or_compute(key, lambda: self._velocity(x, sigma_t, cond, ctx))

    @torch.no_grad()
    def velocity(self, x: torch.Tensor, sigma: torch.Tensor, cond: Condition) -> torch.Tensor:
        """The protocol's `velocity`: the transformer's velocity at flow time sigma[r] (guidance included), float32;
        x is cast to the model's device and dtype as `sample_latents` holds it."""
        x = x.to(self.device, self.dtype)
        return self._velocity(x, sigma.to(self.device, torch.float32), cond, self._prepare(x, cond)).to(torch.float32)

    @torch.no_grad()
    def sample_latents(self, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor, first_velocity: torch.Tensor | None = None) -> torch.Tensor:
        """Euler from sigmas[:, 0] (1, or a free start below it) to sigmas[:, N] = 0, one network call per step for the whole batch.

        Mirrors FlowMatchEulerDiscreteScheduler.step: the state is upcast to float32, the step
        dt * v is formed as the scheduler forms it (`mul_as_scheduler`), and the result is cast back.
        `first_velocity`: the first step's velocity, already computed (`sample_context_rows`).
        """
        sigmas = self._check_batch(x_T, cond, sigmas)
        if first_velocity is not None and first_velocity.shape != x_T.shape:
            raise ValueError(f"first_velocity has shape {tuple(first_velocity.shape)}, the batch {tuple(x_T.shape)}")
        x = x_T.to(self.device, self.dtype)
        ctx = self._prepare(x, cond)
        for i in range(sigmas.shape[1] - 1):
            if i == 0 and first_velocity is not None:
                v = first_velocity
            else:
                v = (self._first_velocity if i == 0 else self._velocity)(x, sigmas[:, i], cond, ctx)
            x = self._euler_update(x, v, sigmas[:, i], sigmas[:, i + 1])
        return x

    @torch.no_grad()
    def sample_context_rows(self, x_T: torch.Tensor, cond: Condition, rows: torch.Tensor, sigmas: torch.Tensor, batch: int | None) -> torch.Tensor:
        """`base.sample_rollout_rows`: `sample_in_batches(self, x_T[rows], cond.take(rows), sigmas, batch)`, with the
        first step's velocity computed once per context instead of once per row.

        A training update draws K schedules per context, every one starting from the context's noise at sigma 1,
        so the first network call reads the same input K times. Here each context's first velocity is computed
        once, in calls of exactly as many rows as the sampler's own calls have (the last one filled up with
        copies of its last row): a network call's rows do not depend on the other rows in it, but may on how
        many there are (the matrix kernels block by size; on the CPU a scenes-dit row's bits differ in calls
        of 1-5 rows and not above), so every row's velocity is the one its own sampler call would compute.
        The rows are sampled as they are where that cannot hold: the rows do not fill whole calls, a context's
        rows start at different levels, the class samples otherwise (it overrides `sample`; an instance whose
        `sample` is replaced is not seen), or the tensors are
        not on the CPU (a GPU's kernels may round a row differently at another position in the same call:
        unchecked there); and where it would save no call (one call holds every row)."""
        n = rows.numel()
        size = min(int(batch or n), n)
        plain = lambda: sample_in_batches(self, x_T[rows], cond.take(rows), sigmas, batch)  # noqa: E731
        if sigmas.dtype not in (torch.float32, torch.float64) or type(self).sample is not DiffusersBackbone.sample \
                or self.device.type != "cpu" or x_T.device.type != "cpu" or n % size:
            return plain()  # (the first refuses a rounded schedule, as every sampler call does)
        sigmas = sigmas.to(self.device, torch.float32)
        rows = rows.to(x_T.device)
        contexts, slot = torch.unique(rows, sorted=True, return_inverse=True)
        positions = torch.arange(n, device=rows.device)
        first = torch.full((contexts.numel(),), n, device=rows.device).scatter_reduce(0, slot, positions, "amin")  # a context's first row
        start = sigmas[:, 0].contiguous().view(torch.int32)  # the starting levels' bits (-0.0 is not 0.0)
        one_level = bool((start == start[first[slot]]).all())  # every row of a context starts where its first does
        if not one_level or n // size <= -(-contexts.numel() // size):
            return plain()
        fill = [first[-1:]] * ((-contexts.numel()) % size)
        firsts = torch.cat([first, *fill])  # each context's first row, then copies of the last: whole calls
        velocity = []
        for lo in range(0, firsts.numel(), size):
            r = rows[firsts[lo : lo + size]]
            x, c = x_T[r].to(self.device, self.dtype), cond.take(r)
            velocity.append(self._velocity(x, sigmas[firsts[lo : lo + size], 0], c, self._prepare(x, c)))
        velocity = torch.cat(velocity)
        images = []
        for lo in range(0, n, size):
            r = rows[lo : lo + size]
            latents = self.sample_latents(x_T[r], cond.take(r), sigmas[lo : lo + size], first_velocity=velocity[slot[lo : lo + size]])
            images.append(self._decode_all(latents))
        return torch.cat(images)

    @staticmethod
    def _euler_update(x: torch.Tensor, v: torch.Tensor, sigma: torch.Tensor, sigma_next: torch.Tensor) -> torch.Tensor:
        """FlowMatchEulerDiscreteScheduler.step for every row: x + (sigma_next - sigma) v in float32, cast back."""
        dt = (sigma_next - sigma).view((x.shape[0],) + (1,) * (x.dim() - 1))
        return (x.to(torch.float32) + mul_as_scheduler(dt, v)).to(v.dtype)

    def euler_stepper(self, cond: Condition) -> EulerStepper:
        """`sample_latents`' loop one step at a time (`_velocity`, `_euler_update`): the same bits along the same
        sigmas. The sigmas are float32 on the backbone's device, as `_check_batch` makes them."""
        ctx: dict = {}

        def start(x_T):
            x = x_T.to(self.device, self.dtype)
            ctx.update(self._prepare(x, cond))
            return x

        def step(x, sigma, sigma_next):
            sigma, sigma_next = sigma.to(self.device, torch.float32), sigma_next.to(self.device, torch.float32)
            return self._euler_update(x, self._velocity(x, sigma, cond, ctx), sigma, sigma_next)

        return EulerStepper(start=start, step=step, latents=lambda x: x, images=self._decode_all)

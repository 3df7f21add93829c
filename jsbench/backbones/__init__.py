"""Backbones behind one protocol (`base.Backbone`), looked up by name in a registry.

Adding a backbone is adding one module whose class sets the protocol's declared attributes (`base.Backbone`:
default_steps, ceiling_steps, draws_embedded_world, ...; a diffusers adapter inherits DiffusersBackbone's) and
that calls `register("name")` on a factory `factory(model: str | None, device: str | None) -> TheClass` (the
annotation lets `backbone_class` read the class without weights), plus its line in `_MODULES` below. A
factory that also takes `dtype`, `offload` and `decode_chunk` keywords gets the CLI's
--dtype/--offload/--decode-chunk (the diffusers backbones do). `load_backbone` refuses a backbone that lacks
any protocol attribute or call (`IncompleteBackbone`, naming them). A diffusers adapter may also declare the
harness's sizes: `tiny_sampling` with a `tiny_pipeline` classmethod (its tiny test pipeline) and `full_size`
(its published network, for FLOP estimates).
"""

from __future__ import annotations

import math

from jsbench import JsbenchError
from jsbench.backbones.base import Backbone, Condition, missing_protocol_attrs
from jsbench.registry import Registry

__all__ = ["Backbone", "Condition", "register", "load_backbone", "available_backbones", "UnknownBackbone", "IncompleteBackbone",
           "parse_dtype", "recorded_guidance"]

# name -> module that registers it; imported lazily so `analytic` never pays for diffusers.
_MODULES = {
    "analytic": "jsbench.backbones.analytic",
    # real backbones (issue 3): diffusers pipelines' parts, weights from a local folder or the HF cache
    "sdxl": "jsbench.backbones.sdxl",
    "sd35": "jsbench.backbones.sd35",
    "sd35-medium": "jsbench.backbones.sd35",
    "sd35-large": "jsbench.backbones.sd35",
    "flux-dev": "jsbench.backbones.flux",
    "flux-schnell": "jsbench.backbones.flux",
    # a tiny SD3 pipeline with learned weights, trained on the embedded world's renders (issue 8)
    "scenes-dit": "jsbench.backbones.scenes_dit",
    # the embedded world with texture at prompt- and noise-dependent scales: the positive control (issue 14)
    "detail": "jsbench.backbones.detail",
}


class UnknownBackbone(JsbenchError):
    pass


class IncompleteBackbone(JsbenchError):
    """A registered backbone that lacks an attribute or call of the Backbone protocol (refused when loaded)."""


_REGISTRY = Registry("backbone", UnknownBackbone, _MODULES, group="jsbench.backbones")  # + plugins (entry points)
register = _REGISTRY.register
available_backbones = _REGISTRY.names


_DTYPES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "half": "float16",
    "fp32": "float32", "float32": "float32", "float": "float32",
}


def parse_dtype(dtype):
    """`--dtype` text (bf16, fp16, fp32 and their long names) or a torch.dtype -> torch.dtype; None stays None."""
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    key = str(dtype).strip().lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise UnknownBackbone(f"unknown --dtype {dtype!r}: use bf16, fp16 or fp32")
    return getattr(torch, _DTYPES[key])


def load_backbone(
    name: str, model: str | None = None, device: str | None = None, *, dtype=None, offload: bool | str = False,
    decode_chunk: int | None = None, guidance: float | None = None, share_with=None,
) -> Backbone:
    """The registered backbone `name`. `dtype` (None: bf16 on CUDA, fp32 elsewhere), `offload` (True or
    "model": diffusers' model CPU offload; "text", "sequential": see `_diffusers.load_pipeline`) and `decode_chunk` (images per VAE call) are passed only when set, so a backbone
    whose factory does not take them still loads with the defaults and refuses them in one line. `guidance`
    (None: the pipeline's own scale) is the guidance scale the diffusers backbones sample with; `share_with`, a
    loaded diffusers backbone whose identical text encoders and VAE are used instead of copies."""
    import inspect

    factory = _REGISTRY.get(name)
    options = {"dtype": parse_dtype(dtype), "offload": offload or None, "decode_chunk": decode_chunk, "guidance": guidance,
               "share_with": share_with}
    options = {k: v for k, v in options.items() if v is not None}
    params = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for key in options:
        if key not in params and not takes_any:
            flag = "--" + key.replace("_", "-")
            raise UnknownBackbone(f"backbone {name!r} has no {flag} option (it runs in its own dtype and memory)")
    if guidance is not None and not (math.isfinite(guidance) and guidance >= 0):
        raise UnknownBackbone(f"--guidance must be a finite number >= 0, got {guidance}")
    if decode_chunk is not None and decode_chunk < 1:
        raise UnknownBackbone(f"--decode-chunk must be at least 1, got {decode_chunk}")
    backbone = factory(model=model, device=device, **options)
    missing = missing_protocol_attrs(backbone)
    if missing:
        raise IncompleteBackbone(
            f"backbone {name!r} ({type(backbone).__name__}) does not declare {', '.join(missing)}, which the Backbone "
            "protocol asks of every backbone (see jsbench/backbones/base.py)"
        )
    return backbone


def backbone_class(name: str) -> type | None:
    """The class backbone `name`'s factory returns (its return annotation), found without building it, so
    class attributes such as `draws_embedded_world` can be read without loading weights; None if unknown."""
    import inspect

    try:
        annotation = inspect.signature(_REGISTRY.get(name), eval_str=True).return_annotation
    except (NameError, TypeError, ValueError, SyntaxError):
        return None
    return annotation if isinstance(annotation, type) else None


def backbones_in_order() -> list[str]:
    """Every registered backbone name in the order `_MODULES` declares them, then any registered elsewhere
    (`available_backbones` sorts them): the order derived tables (tiny pipelines, full-size sizes) keep."""
    names = available_backbones()
    return [n for n in _MODULES if n in names] + [n for n in names if n not in _MODULES]


def declared_by_class(attr: str) -> dict[str, object]:
    """Backbone name -> `attr` for every registered backbone whose OWN class body sets it (not None), in the
    registry's order: what derived tables (tiny pipelines, full-size configs) are built from. A subclass that
    only inherits it (sd35-large, scenes-dit) runs its parent's, and a class another name already stands for
    (an alias) is not repeated."""
    out: dict[str, object] = {}
    seen: set[type] = set()
    for name in backbones_in_order():
        cls = backbone_class(name)
        if cls is None or cls in seen or cls.__dict__.get(attr) is None:
            continue
        seen.add(cls)
        out[name] = cls.__dict__[attr]
    return out


def declaring_name(name: str, attr: str) -> str | None:
    """The name in `declared_by_class(attr)` whose class body sets the `attr` backbone `name`'s class uses: `name`
    itself, or the registered owner it inherits it from (sd35-medium -> sd35 for `full_size`, so a table keyed by
    owner, a FLOP count or a measurement, serves the subclass); None when no registered class declares it."""
    cls = backbone_class(name)
    if cls is None:
        return None
    owner = next((c for c in cls.__mro__ if attr in c.__dict__), None)  # a class body that sets None opts out (scenes-dit)
    return next((key for key in declared_by_class(attr) if backbone_class(key) is owner), None)


def listing_backbone(name: str):
    """What a suite needs to list backbone `name`'s prompts, read from its class without building it (no
    weights): its name, default model, `draws_embedded_world` and `geneval_world`. None when the backbone
    must be loaded instead: it draws an embedded world (its prompts may be its own; the embedded worlds are
    small), or its class is unknown."""
    from types import SimpleNamespace

    cls = backbone_class(name)
    if cls is None or cls.draws_embedded_world:
        return None
    return SimpleNamespace(name=name, model_id=cls.default_model_id, device=None, draws_embedded_world=False, draws_text=cls.draws_text,
                           geneval_world=cls.geneval_world)


def recorded_guidance(backbone) -> str | None:
    """The guidance scale a backbone samples with, as records, manifests and leaderboards carry it ("3.5");
    None where it takes none (the embedded worlds, Flux-Schnell)."""
    get = getattr(backbone, "recorded_guidance", None)
    value = get() if callable(get) else None
    return None if value is None else f"{float(value):g}"

"""Backbones behind one protocol (`base.Backbone`), looked up by name in a registry.

Adding a backbone is adding one module that calls `register("name")` on a factory
`factory(model: str | None, device: str | None) -> Backbone`.
"""

from __future__ import annotations

import importlib
from typing import Callable

from jsbench import JsbenchError
from jsbench.backbones.base import Backbone, Condition

__all__ = ["Backbone", "Condition", "register", "load_backbone", "available_backbones", "UnknownBackbone"]

_FACTORIES: dict[str, Callable[..., Backbone]] = {}
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
}


class UnknownBackbone(JsbenchError):
    pass


def register(name: str):
    def deco(factory):
        _FACTORIES[name] = factory
        return factory

    return deco


def available_backbones() -> list[str]:
    return sorted(set(_MODULES) | set(_FACTORIES))


def load_backbone(name: str, model: str | None = None, device: str | None = None) -> Backbone:
    if name not in _FACTORIES and name in _MODULES:
        importlib.import_module(_MODULES[name])
    if name not in _FACTORIES:
        raise UnknownBackbone(f"unknown backbone {name!r}; choose one of: {', '.join(available_backbones())}")
    return _FACTORIES[name](model=model, device=device)

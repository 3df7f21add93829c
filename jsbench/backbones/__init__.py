"""Backbones behind one protocol (`base.Backbone`), looked up by name in a registry.

Adding a backbone is adding one module that calls `register("name")` on a factory
`factory(model: str | None, device: str | None) -> Backbone`.
"""

from __future__ import annotations

from jsbench import JsbenchError
from jsbench.backbones.base import Backbone, Condition
from jsbench.registry import Registry

__all__ = ["Backbone", "Condition", "register", "load_backbone", "available_backbones", "UnknownBackbone"]

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
}


class UnknownBackbone(JsbenchError):
    pass


_REGISTRY = Registry("backbone", UnknownBackbone, _MODULES)
register = _REGISTRY.register
available_backbones = _REGISTRY.names


def load_backbone(name: str, model: str | None = None, device: str | None = None) -> Backbone:
    return _REGISTRY.get(name)(model=model, device=device)

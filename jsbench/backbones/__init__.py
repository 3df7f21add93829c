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


def backbone_class(name: str) -> type | None:
    """The class backbone `name`'s factory returns (its return annotation), found without building it, so
    class attributes such as `draws_embedded_world` can be read without loading weights; None if unknown."""
    import inspect

    try:
        annotation = inspect.signature(_REGISTRY.get(name), eval_str=True).return_annotation
    except (NameError, TypeError, ValueError, SyntaxError):
        return None
    return annotation if isinstance(annotation, type) else None

"""The registry of zoo sources: each source family's module registers a builder under its name.

A builder `build(spec, backbone, steps, suite=None, log=None) -> (label, make, checksum)` turns a
`--schedule` spec into what `evaluate.resolve_schedule` runs: `make(x_T, cond) -> [B, N+1]` sigmas on
x_T's device. `available(backbone, steps)` (optional) raises ZooError where the row does not exist for
this backbone, so `jsbench compare` skips it with the reason logged. `opt_in(backbone)` (optional) returns
why the row is left out of compare's *default* zoo on this backbone (its cost), or None where it is in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from jsbench.registry import Registry
from jsbench.zoo.clock import ZooError, digest

__all__ = ["ZOO_MODULES", "ZooKind", "register_zoo", "zoo_kind", "constant_source"]

# every zoo name -> the module that registers it, so a lookup imports only that module
ZOO_MODULES: dict[str, str] = {
    "karras": "jsbench.zoo.families",
    "exponential": "jsbench.zoo.families",
    "beta": "jsbench.zoo.families",
    "ays": "jsbench.zoo.ays",
    "oss": "jsbench.zoo.oss",
    "oss-mean": "jsbench.zoo.oss",
    "oss-image": "jsbench.zoo.oss",
    "searched": "jsbench.zoo.searched",
    "file": "jsbench.zoo.files",
}


@dataclass(frozen=True)
class ZooKind:
    build: Callable
    available: Callable | None = None
    opt_in: Callable | None = None


_REGISTRY: Registry = Registry("zoo schedule", ZooError, ZOO_MODULES, package="jsbench.zoo")


def register_zoo(name: str, available: Callable | None = None, opt_in: Callable | None = None) -> Callable:
    """Decorator: register `build` as the zoo source `name` (see the module docstring)."""

    def deco(build: Callable) -> Callable:
        _REGISTRY.register(name)(ZooKind(build, available, opt_in))
        return build

    return deco


def zoo_kind(name: str) -> ZooKind:
    return _REGISTRY.get(name)


def constant_source(label: str, row: torch.Tensor):
    """(label, make, checksum) of one schedule row shared by every image, put on each batch's device."""

    def make(x, c):
        return row.to(x.device, torch.float32).expand(x.shape[0], -1).clone()

    return label, make, digest(row)

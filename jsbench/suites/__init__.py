"""Evaluation suites: a prompt set, a per-image scorer and an aggregate, registered by name.

A suite is one module that calls `register_suite("name")` on a factory `factory(backbone) -> Suite`.
"""

from __future__ import annotations

import importlib
from typing import Callable

from jsbench import JsbenchError
from jsbench.suites.base import EvalItem, Suite, TaskMetric, aggregate_by_task

__all__ = ["Suite", "EvalItem", "TaskMetric", "aggregate_by_task", "register_suite", "load_suite", "available_suites", "UnknownSuite"]


class UnknownSuite(JsbenchError):
    pass


_FACTORIES: dict[str, Callable] = {}
_MODULES: dict[str, str] = {"geneval": "jsbench.suites.geneval", "ocr": "jsbench.suites.ocr", "hpdv2": "jsbench.suites.hpdv2"}


def register_suite(name: str):
    def deco(factory):
        _FACTORIES[name] = factory
        return factory

    return deco


def available_suites() -> list[str]:
    return sorted(set(_MODULES) | set(_FACTORIES))


def load_suite(name: str, backbone=None, **options) -> Suite:
    if name not in _FACTORIES and name in _MODULES:
        importlib.import_module(_MODULES[name])
    if name not in _FACTORIES:
        raise UnknownSuite(f"unknown suite {name!r}; choose one of: {', '.join(available_suites())}")
    return _FACTORIES[name](backbone, **options)

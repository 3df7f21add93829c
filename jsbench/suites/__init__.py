"""Evaluation suites: a prompt set, a per-image scorer and an aggregate, registered by name.

A suite is one module that calls `register_suite("name")` on a factory `factory(backbone) -> Suite`.
"""

from __future__ import annotations

from typing import Callable

from jsbench import JsbenchError
from jsbench.registry import Registry
from jsbench.suites.base import EvalItem, Suite, TaskMetric, aggregate_by_task

__all__ = ["Suite", "EvalItem", "TaskMetric", "aggregate_by_task", "register_suite", "load_suite", "available_suites", "UnknownSuite"]


class UnknownSuite(JsbenchError):
    pass


# Known names -> their module, so a lookup imports only that module; a suite not listed here is still
# found (the registry imports this package's modules on a miss), so a new suite needs no line here.
_MODULES: dict[str, str] = {"geneval": "jsbench.suites.geneval", "ocr": "jsbench.suites.ocr", "hpdv2": "jsbench.suites.hpdv2"}


_REGISTRY = Registry("suite", UnknownSuite, _MODULES, package="jsbench.suites")
register_suite = _REGISTRY.register
available_suites = _REGISTRY.names


def load_suite(name: str, backbone=None, **options) -> Suite:
    return _REGISTRY.get(name)(backbone, **options)

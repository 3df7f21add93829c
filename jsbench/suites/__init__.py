"""Evaluation suites: a prompt set, a per-image scorer and an aggregate, registered by name.

A suite is one module that calls `register_suite("name")` on a factory `factory(backbone) -> Suite`.
"""

from __future__ import annotations

from jsbench import JsbenchError
from jsbench.registry import Registry

__all__ = ["Suite", "EvalItem", "TaskMetric", "aggregate_by_task", "register_suite", "load_suite", "available_suites",
           "declared_suites", "UnknownSuite", "preflight", "OCR_PROTOCOLS", "suite_options"]
_BASE_NAMES = ("Suite", "EvalItem", "TaskMetric", "aggregate_by_task")


def __getattr__(name: str):
    """The suites' types (suites/base.py, which needs torch) on first use, so importing this package to name
    the suites (`declared_suites`, for the CLI's --help) imports no model library."""
    if name in _BASE_NAMES:
        import importlib

        return getattr(importlib.import_module("jsbench.suites.base"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownSuite(JsbenchError):
    pass


# Known names -> their module, so a lookup imports only that module; a suite not listed here is still
# found (the registry imports this package's modules on a miss), so a new suite needs no line here.
_MODULES: dict[str, str] = {"geneval": "jsbench.suites.geneval", "ocr": "jsbench.suites.ocr", "hpdv2": "jsbench.suites.hpdv2"}


_REGISTRY = Registry("suite", UnknownSuite, _MODULES, package="jsbench.suites", group="jsbench.suites")  # + plugins
register_suite = _REGISTRY.register
available_suites = _REGISTRY.names


def declared_suites() -> tuple[str, ...]:
    """The suites declared above (name -> module), in order, read without importing any of them; a suite
    found only by scanning the package is in `available_suites()`, which imports them all."""
    return tuple(_MODULES)


OCR_PROTOCOLS = ("words", "mario")  # the ocr suite's readings (jsbench.suites.ocr), named here without torch


def suite_options(name: str, ocr_protocol: str | None = None) -> dict:
    """`load_suite`'s options from the command line's suite options (eval, compare, train), refused in one line
    where they name nothing or do not apply to suite `name`; given nothing, the suite's defaults."""
    if ocr_protocol is None:
        return {}
    if ocr_protocol not in OCR_PROTOCOLS:
        raise JsbenchError(f"unknown --ocr-protocol {ocr_protocol!r}: use {' or '.join(OCR_PROTOCOLS)}")
    if name != "ocr":
        raise JsbenchError(f"--ocr-protocol sets how the ocr suite reads images; --suite {name} reads none: drop it")
    return {"protocol": ocr_protocol}


def load_suite(name: str, backbone=None, **options) -> Suite:
    return _REGISTRY.get(name)(backbone, **options)


def preflight(name: str, backbone_cls=None) -> None:
    """Refuse, in one line and before any weights load or image is sampled, what suite `name` cannot score:
    its module's `preflight(backbone_cls)` when it has one (ocr: a backbone that draws no text; hpdv2: the
    benchmark prompts or the HPSv2 weights missing). `backbone_cls` is the backbone's class (or the backbone);
    None checks only what needs no backbone."""
    import sys

    check = getattr(sys.modules[_REGISTRY.get(name).__module__], "preflight", None)
    if check is not None:
        check(backbone_cls)

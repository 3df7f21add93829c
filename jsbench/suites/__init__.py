"""Evaluation suites: a prompt set, a per-image scorer and an aggregate, registered by name.

A suite is one module that defines a `Suite` subclass declaring what the rest of jsbench knows of it
(suites/base.py: its primary metric, protocol images per prompt, overall rule, leaderboard metrics,
provenance, preflight) and calls `register_suite("name")` on that class or on a factory
`factory(backbone, **options) -> TheClass` (the return annotation names the class, so `suite_class` reads
the declarations without building the suite). `load_suite` and `suite_class` refuse a suite whose class
does not declare them (`IncompleteSuite`, naming what is missing). Other packages add suites the same way,
through the `jsbench.suites` entry points (docs/plugins.md).
"""

from __future__ import annotations

from pathlib import Path

from jsbench import JsbenchError
from jsbench.registry import Registry

__all__ = ["Suite", "EvalItem", "TaskMetric", "aggregate_by_task", "register_suite", "load_suite", "available_suites",
           "declared_suites", "suite_class", "UnknownSuite", "IncompleteSuite", "preflight", "OCR_PROTOCOLS", "suite_options"]
_BASE_NAMES = ("Suite", "EvalItem", "TaskMetric", "aggregate_by_task")


def __getattr__(name: str):
    """The suites' types (suites/base.py) on first use, so importing this package to name the suites
    (`declared_suites`, for the CLI's --help) imports nothing more."""
    if name in _BASE_NAMES:
        import importlib

        return getattr(importlib.import_module("jsbench.suites.base"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownSuite(JsbenchError):
    pass


class IncompleteSuite(JsbenchError):
    """A registered suite whose class does not declare what the Suite protocol asks (refused where it is looked up)."""


# Known names -> their module, so a lookup imports only that module (and --help names them without importing
# any); a suite not listed here is still found (the registry imports this package's modules on a miss).
_MODULES: dict[str, str] = {"geneval": "jsbench.suites.geneval", "ocr": "jsbench.suites.ocr", "hpdv2": "jsbench.suites.hpdv2"}


_REGISTRY = Registry("suite", UnknownSuite, _MODULES, package="jsbench.suites", group="jsbench.suites")  # + plugins
register_suite = _REGISTRY.register
available_suites = _REGISTRY.names


def declared_suites() -> tuple[str, ...]:
    """The suites declared above (name -> module), in order, read without importing any of them; a suite
    found only by scanning the package is in `available_suites()`, which imports them all."""
    return tuple(_MODULES)


OCR_PROTOCOLS = ("words", "mario")  # the ocr suite's readings (jsbench.suites.ocr), named here without torch


def suite_options(name: str, ocr_protocol: str | None = None, prompts_file: str | None = None) -> dict:
    """`load_suite`'s options from the command line's suite options (eval, compare, train), refused in one line
    where they name nothing or do not apply to suite `name`; given nothing, the suite's defaults. `prompts_file`
    (train's --prompts-file) replaces the ocr suite's prompts; it must be a file (its lines are read, and refused
    line by line, where the suite loads)."""
    options = {}
    if ocr_protocol is not None:
        if ocr_protocol not in OCR_PROTOCOLS:
            raise JsbenchError(f"unknown --ocr-protocol {ocr_protocol!r}: use {' or '.join(OCR_PROTOCOLS)}")
        if name != "ocr":
            raise JsbenchError(f"--ocr-protocol sets how the ocr suite reads images; --suite {name} reads none: drop it")
        options["protocol"] = ocr_protocol
    if prompts_file is not None:
        if name != "ocr":
            raise JsbenchError(f"--prompts-file gives the ocr suite its training prompts; --suite {name} has its own: drop it")
        if not Path(prompts_file).is_file():
            raise JsbenchError(f"--prompts-file {prompts_file}: no such file")
        options["prompts_file"] = str(prompts_file)
    return options


def suite_class(name: str) -> type:
    """The class suite `name` is (the class registered, or the class its factory's return annotation names),
    its declarations checked, found without building the suite: no prompt file is read, no model loaded.
    A suite whose class is not found or does not declare what `Suite` asks is refused in one line."""
    import inspect

    from jsbench.suites.base import declaration_problems

    factory = _REGISTRY.get(name)
    cls = factory
    if not isinstance(factory, type):
        try:
            cls = inspect.signature(factory, eval_str=True).return_annotation
        except (NameError, TypeError, ValueError, SyntaxError):
            cls = None
        if not isinstance(cls, type) or cls is inspect.Signature.empty:
            raise IncompleteSuite(f"suite {name!r}: its factory {getattr(factory, '__qualname__', factory)!r} names no suite class "
                                  "(register a jsbench.suites.Suite subclass, or annotate the factory's return with one)")
    problems = declaration_problems(cls)
    if not problems and cls.name != name:  # its records, leaderboard and check files go by the name it declares
        problems = [f"declares name {cls.name!r}, registered as {name!r}"]
    if problems:
        raise IncompleteSuite(f"suite {name!r} ({cls.__name__}): {'; '.join(problems)}, as the Suite protocol asks of every suite "
                              "(see jsbench/suites/base.py)")
    return cls


def load_suite(name: str, backbone=None, **options) -> Suite:
    """Suite `name` built for `backbone` with `options`; one that does not declare the protocol is refused before
    it is built, one that lacks a call (items, score, aggregate) once it is."""
    from jsbench.suites.base import missing_calls

    suite_class(name)
    suite = _REGISTRY.get(name)(backbone, **options)
    missing = missing_calls(suite)
    if missing:
        raise IncompleteSuite(f"suite {name!r} ({type(suite).__name__}) lacks {', '.join(missing)}, which the Suite protocol asks of "
                              "every suite (see jsbench/suites/base.py)")
    return suite


def preflight(name: str, backbone_cls=None, **options) -> None:
    """Refuse, in one line and before any weights load or image is sampled, what suite `name` cannot score:
    its class's `preflight(backbone_cls, **options)` (ocr: a backbone that draws no text, a prompts file's
    bad line; hpdv2: the benchmark prompts or the HPSv2 weights missing; a suite that declares none checks
    nothing). `backbone_cls` is the backbone's class (or the backbone); None checks only what needs no
    backbone. `options`: the suite's options, as `suite_options` gives them."""
    suite_class(name).preflight(backbone_cls, **options)

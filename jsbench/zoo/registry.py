"""The one registry of schedule sources: every `--schedule` spec resolves through it.

A source kind declares itself in a `ScheduleKind` record: its name, its argument syntax (what `--schedule`'s
help and the unknown-spec error list), a one-line summary, whether it is a zoo row (a schedule `jsbench
compare --zoo` may add) and whether compare adds it when --zoo is not given, its place among the zoo rows of
a leaderboard, whether it runs a teacher (then `teacher`, "module:function" or a callable, estimates the
extra model calls for `--plan`), and for which backbones the row exists at all (`applies`, "module:function"
or a callable of the backbone's class, read without weights: `--plan` leaves out what compare would skip).
jsbench's own kinds are the records in `SOURCES` below; their behaviour lives in the module each names, which
registers it with `@register_source(name)`:

    build(spec, backbone, steps, suite=None, log=None) -> ScheduleSource | (label, make, checksum)

`make(x_T, cond) -> [B, N+1]` sigmas on x_T's device. `available(backbone, steps)` (optional) raises
ZooError where the row does not exist for this backbone, so `jsbench compare` skips it with the reason
logged; `opt_in(backbone)` (optional) returns why the row is left out of compare's *default* zoo on this
backbone (its cost), or None where it is in. A plugin's record (entry-point group `jsbench.schedules`)
carries `build`, `available` and `opt_in` itself.

This module imports no torch: the CLI builds its help text from the declarations.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from jsbench import JsbenchError
from jsbench.registry import JSBENCH_ORIGIN, Registry, load_each, plugin_entries, plugin_record

__all__ = ["ZooError", "ScheduleSource", "ScheduleKind", "SOURCES", "ZOO_MODULES", "ZooKind", "register_source", "register_zoo",
           "zoo_kind", "schedule_kind", "schedule_kinds", "source_kind_names", "spec_syntax", "zoo_kind_names", "default_zoo_kinds",
           "zoo_rank", "teacher_kinds", "teacher_cost", "applies_to", "resolve_source", "constant_source", "SCHEDULE_GROUP"]

SCHEDULE_GROUP = "jsbench.schedules"  # the entry-point group of other packages' schedule sources


class ZooError(JsbenchError):
    """A zoo schedule that cannot be built for this backbone, or a malformed schedule file."""


_AT_STEPS = object()  # ScheduleSource.budget's default: the steps it runs


@dataclass
class ScheduleSource:
    """A schedule to evaluate. `steps` is how many steps it runs; `budget` the step budget of the leaderboard
    section its rows are filed under: `steps` unless given (a distilled sampler runs its own default steps in
    another budget's section), None for a reference row that sits in every section of its backbone (the ceiling)."""

    spec: str
    label: str
    steps: int
    make: Callable = field(repr=False)  # make(x_T, cond) -> [B, N+1] sigmas
    checksum: str | None = None
    manifest: dict | None = None
    budget: int | None = _AT_STEPS  # type: ignore[assignment]
    seed_manifests: list[dict] | None = None  # a learned row of several training seeds: each seed's manifest

    def __post_init__(self):
        if self.budget is _AT_STEPS:
            self.budget = self.steps

    @property
    def row_steps(self) -> int:
        """The `steps` its leaderboard row shows (as `Record.row_steps`): its section's budget, or, for a row
        in every section (the ceiling), the steps it runs."""
        return self.steps if self.budget is None else self.budget


@dataclass(frozen=True)
class ScheduleKind:
    """What a schedule source declares (see the module docstring). `module`: where a jsbench kind registers its
    behaviour; a plugin gives `build` (and optionally `available`, `opt_in`) instead."""

    name: str
    syntax: str  # as help and errors show it: "karras[:RHO]", "policy:PATH"
    summary: str
    module: str | None = None
    zoo: bool = False  # a zoo row: may be named in compare's --zoo
    default_zoo: bool = False  # in compare's zoo when --zoo is not given (a zoo row that is not is opt-in)
    order: float | None = None  # its place among a leaderboard's zoo rows (zoo rows only)
    teacher: str | Callable | None = None  # runs a teacher: "module:function" (spec, steps, cls, cost, images) -> (nfe, note)
    applies: str | Callable | None = None  # "module:function" (backbone class) raising ZooError where the row never exists
    build: Callable | None = None
    available: Callable | None = None
    opt_in: Callable | None = None
    origin: str = JSBENCH_ORIGIN


# jsbench's own schedule sources, in the order help and errors list them (the zoo rows in leaderboard order)
SOURCES: tuple[ScheduleKind, ...] = (
    ScheduleKind("default", "default", "the backbone's own default schedule", "jsbench.zoo.plain"),
    ScheduleKind("ceiling", "ceiling", "the default schedule at the backbone's `ceiling_steps` (the many-step teacher analogue)",
                 "jsbench.zoo.plain"),
    ScheduleKind("uniform", "uniform", "uniform flow-time steps", "jsbench.zoo.plain"),
    ScheduleKind("shift", "shift:S", "the SD3/Flux shift S applied to uniform steps", "jsbench.zoo.plain"),
    ScheduleKind("policy", "policy:PATH", "a trained policy, its deterministic Dirichlet-mean schedule", "jsbench.zoo.policy"),
    ScheduleKind("global", "global:PATH", "the same as policy:PATH (a global policy)", "jsbench.zoo.policy"),
    ScheduleKind("karras", "karras[:RHO]", "Karras/EDM sigmas (diffusers' use_karras_sigmas, rho 7)", "jsbench.zoo.families",
                 zoo=True, default_zoo=True, order=0),
    ScheduleKind("exponential", "exponential", "log-uniform sigmas (diffusers' use_exponential_sigmas)", "jsbench.zoo.families",
                 zoo=True, order=1),
    ScheduleKind("beta", "beta[:A,B]", "Beta-quantile sigmas (diffusers' use_beta_sigmas, a = b = 0.6)", "jsbench.zoo.families",
                 zoo=True, order=2),
    ScheduleKind("ays", "ays", "Align Your Steps (diffusers' AysSchedules) where the family has one", "jsbench.zoo.ays",
                 zoo=True, default_zoo=True, order=3, applies="jsbench.zoo.ays:applies"),
    ScheduleKind("oss", "oss[:M]", "Optimal Stepsize Sampling as its authors run it (cached)", "jsbench.zoo.oss",
                 zoo=True, default_zoo=True, order=4, teacher="jsbench.zoo.oss:teacher_cost", applies="jsbench.zoo.oss:applies"),
    ScheduleKind("oss-mean", "oss-mean[:M]", "OSS with one DP on the batch-mean cost, starting at 1 (cached)", "jsbench.zoo.oss",
                 zoo=True, order=5, teacher="jsbench.zoo.oss:teacher_cost", applies="jsbench.zoo.oss:applies"),
    ScheduleKind("oss-image", "oss-image[:M]", "OSS searched on each evaluated image's own teacher trajectory", "jsbench.zoo.oss",
                 zoo=True, default_zoo=True, order=6, teacher="jsbench.zoo.oss:teacher_cost", applies="jsbench.zoo.oss:applies"),
    ScheduleKind("searched", "searched", "the best global schedule of a grid search on the training prompts (cached)",
                 "jsbench.zoo.searched", zoo=True, default_zoo=True, order=7, teacher="jsbench.zoo.searched:teacher_cost"),
    ScheduleKind("file", "file:PATH", "the user's schedule(s), JSON or CSV, or what `schedules export` wrote", "jsbench.zoo.files",
                 zoo=True, order=8),
)
_BUILTIN = {k.name: k for k in SOURCES}

# every jsbench kind -> the module that registers its behaviour, so a lookup imports only that module
ZOO_MODULES: dict[str, str] = {k.name: k.module for k in SOURCES}


@dataclass(frozen=True)
class ZooKind:
    """A source's behaviour (see the module docstring)."""

    build: Callable
    available: Callable | None = None
    opt_in: Callable | None = None


_REGISTRY: Registry = Registry("schedule source", ZooError, ZOO_MODULES)
_PLUGINS: dict[str, ScheduleKind] = {}  # loaded plugin records, by name


def register_source(name: str, available: Callable | None = None, opt_in: Callable | None = None) -> Callable:
    """Decorator: register `build` as the behaviour of jsbench's source `name` (declared in SOURCES)."""

    def deco(build: Callable) -> Callable:
        _REGISTRY.register(name)(ZooKind(build, available, opt_in))
        return build

    return deco


register_zoo = register_source  # the zoo modules' name for it


def _plugin_kind(name: str) -> ScheduleKind | None:
    """The record plugin `name` declares (loaded once), or None when no installed package declares it."""

    def admit(entry, kind) -> ScheduleKind:
        if not isinstance(kind, ScheduleKind):
            raise entry.refuse(f"names a {type(kind).__name__}, not a jsbench.zoo.registry.ScheduleKind", ZooError)
        if kind.name != name or not callable(kind.build) or kind.module is not None:
            raise entry.refuse(f"its ScheduleKind must be named {name!r} and carry a callable build (it has name {kind.name!r}, "
                               f"build {kind.build!r})", ZooError)
        return ScheduleKind(**{**kind.__dict__, "origin": entry.origin})

    return plugin_record(SCHEDULE_GROUP, name, _PLUGINS, ZooError, admit)


def _plugin_names() -> list[str]:
    return [e.name for e in plugin_entries(SCHEDULE_GROUP) if e.name not in _BUILTIN]


def schedule_kind(name: str) -> ScheduleKind | None:
    """The declaration of source kind `name` (jsbench's, else an installed plugin's, loaded now); None if unknown."""
    return _BUILTIN.get(name) or _plugin_kind(name)


def schedule_kinds(errors: list[str] | None = None) -> list[ScheduleKind]:
    """Every source kind: jsbench's, then the plugins' by name. A plugin that does not load is left out, its one
    line appended to `errors` (raised instead when `errors` is None)."""
    return list(SOURCES) + load_each(_plugin_names(), _plugin_kind, errors)


def source_kind_names() -> list[str]:
    """Every kind's name, the plugins' unloaded."""
    return [k.name for k in SOURCES] + _plugin_names()


def spec_syntax(kinds: list[ScheduleKind] | None = None) -> str:
    """'default, ceiling, ..., searched or file:PATH': the specs a --schedule takes. Without `kinds`, jsbench's
    own syntax and the plugins' names (unloaded: help stays fast and a broken plugin cannot break it)."""
    words = [k.syntax for k in kinds] if kinds is not None else [k.syntax for k in SOURCES] + _plugin_names()
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else "".join(words)


def zoo_kind(name: str) -> ZooKind:
    """The behaviour of source kind `name`."""
    if name in _BUILTIN:
        return _REGISTRY.get(name)
    kind = _plugin_kind(name)
    if kind is None:
        raise ZooError(f"unknown schedule source {name!r}; choose one of: {', '.join(source_kind_names())}")
    return ZooKind(kind.build, kind.available, kind.opt_in)


def zoo_kind_names() -> list[str]:
    """The zoo rows (kinds --zoo may name): jsbench's in leaderboard order, then the plugins' that are zoo rows."""
    return [k.name for k in schedule_kinds(errors=[]) if k.zoo]


def default_zoo_kinds() -> tuple[str, ...]:
    """The zoo rows compare adds when --zoo is not given: jsbench's own (a plugin's row runs when named)."""
    return tuple(k.name for k in SOURCES if k.zoo and k.default_zoo)


def zoo_rank(name: str) -> float | None:
    """A zoo row's declared place among a leaderboard's zoo rows; None for a kind that is not a zoo row."""
    if name in _BUILTIN:
        return _BUILTIN[name].order if _BUILTIN[name].zoo else None
    if name not in _plugin_names():
        return None
    try:
        kind = _plugin_kind(name)
    except JsbenchError:
        return None  # a leaderboard still renders; the broken plugin is named where it is run
    return kind.order if kind is not None and kind.zoo else None


def teacher_kinds() -> tuple[str, ...]:
    """jsbench's zoo rows that run a many-step teacher or a search (opt-in on real models)."""
    return tuple(k.name for k in SOURCES if k.teacher is not None)


def _declared_call(value: str | Callable | None) -> Callable | None:
    """A declaration's callable: itself, or the function "module:function" names (imported now), or None."""
    if value is None or callable(value):
        return value
    module, _, attr = value.partition(":")
    return getattr(importlib.import_module(module), attr)


def teacher_cost(kind: ScheduleKind) -> Callable | None:
    """The kind's teacher-cost estimate (spec, steps, cls, cost, images) -> (extra NFE, note), or None."""
    return _declared_call(kind.teacher)


def applies_to(kind: ScheduleKind, cls) -> str | None:
    """Why the kind's row never exists for a backbone of class `cls` (its declared `applies`, read from the class
    without weights), or None where it may: then `available` decides on the loaded backbone."""
    check = _declared_call(kind.applies)
    try:
        if check is not None:
            check(cls)
    except ZooError as exc:
        return str(exc)
    return None


def resolve_source(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource | None:
    """The ScheduleSource of a `--schedule` spec; None when no kind is named so (the caller words the error)."""
    name = spec.partition(":")[0]
    if schedule_kind(name) is None:
        return None
    made = zoo_kind(name).build(spec, backbone, steps, suite=suite, log=log)
    if isinstance(made, ScheduleSource):
        return made
    label, make, checksum = made
    return ScheduleSource(spec, label, steps, make, checksum)


def constant_source(label: str, row):
    """(label, make, checksum) of one schedule row shared by every image, put on each batch's device."""
    import torch

    from jsbench.zoo.clock import digest

    def make(x, c):
        return row.to(x.device, torch.float32).expand(x.shape[0], -1).clone()

    return label, make, digest(row)


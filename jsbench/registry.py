"""Named factories, looked up lazily: the one mechanism behind backbones, rewards, suites and OCR engines.

A module registers a factory under a name with `@registry.register("name")`. Names can also be
declared up front as `name -> module` so that looking one up imports only that module (the analytic
backbone never pays for diffusers). A registry given its `package` also finds names nobody declared:
on a miss it imports the package's public modules once, so adding a reward or a suite is adding one
file. An unknown name is one line listing the known ones (and any module that failed to import).

Other packages add names through Python entry points (`plugin_entries`): a registry given its `group`
(e.g. "jsbench.backbones") lists the group's entry-point names without importing them and loads one only
when it is looked up; a plugin that fails to load is one line naming it and its distribution, no traceback.
A name jsbench itself registers always wins over a plugin's.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from jsbench import JsbenchError

F = TypeVar("F", bound=Callable)
T = TypeVar("T")

JSBENCH_ORIGIN = "jsbench"  # what `jsbench plugins` shows for what jsbench itself registers


class PluginError(JsbenchError):
    """A plugin (an entry point of another package) that does not load or does not declare what its group asks."""


@dataclass(frozen=True)
class PluginEntry:
    """One entry point of a jsbench group, not yet loaded: its name, `module:attr` and the distribution that
    declares it (its `origin`, as `jsbench plugins` shows it)."""

    name: str
    value: str
    group: str
    distribution: str
    entry_point: object

    @property
    def origin(self) -> str:
        return self.distribution

    def load(self, error: type[JsbenchError] = PluginError):
        """The object the entry point names; any failure is one line naming the plugin and its package."""
        try:
            return self.entry_point.load()
        except Exception as exc:  # a plugin's import error, a missing attribute: not jsbench's traceback
            raise error(f"plugin {self.name!r} ({self.group} = {self.value}) of package {self.distribution} did not load: "
                        f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) from None

    def refuse(self, what: str, error: type[JsbenchError] = PluginError) -> JsbenchError:
        """The one-line error for a loaded plugin that is not what its group asks for."""
        return error(f"plugin {self.name!r} ({self.group} = {self.value}) of package {self.distribution}: {what}")


def plugin_entries(group: str) -> list[PluginEntry]:
    """The entry points of `group` in every installed distribution, sorted by name (none loaded). Read afresh
    on each call: installing a plugin needs no restart of a long-lived process, and a lookup is cheap."""
    from importlib.metadata import entry_points

    out = {}
    for ep in entry_points(group=group):
        dist = getattr(ep, "dist", None)
        label = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "an unnamed distribution"
        out.setdefault(ep.name, PluginEntry(ep.name, ep.value, group, label, ep))
    return [out[name] for name in sorted(out)]


def plugin_entry(group: str, name: str) -> PluginEntry | None:
    return next((e for e in plugin_entries(group) if e.name == name), None)


def load_each(names, load: Callable[[str], T], errors: list[str] | None = None) -> list[T]:
    """`load(name)` for every name; a JsbenchError (a plugin that does not load) is appended to `errors` as
    its one line and the name left out, or raised when `errors` is None."""
    out = []
    for name in names:
        try:
            out.append(load(name))
        except JsbenchError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    return out


def plugin_record(group: str, name: str, cache: dict[str, T], error: type[JsbenchError], admit: Callable[[PluginEntry, object], T]) -> T | None:
    """The record that plugin `name` of entry-point `group` declares, loaded once into `cache`: `admit(entry,
    loaded)` checks what the entry point named (raising `entry.refuse(...)`) and returns the record to keep;
    a plugin that does not load is one line (`error`). None when no installed package declares `name`."""
    if name in cache:
        return cache[name]
    entry = plugin_entry(group, name)
    if entry is None:
        return None
    cache[name] = record = admit(entry, entry.load(error))
    return record


class Registry(Generic[F]):
    def __init__(self, kind: str, error: type[JsbenchError], modules: dict[str, str] | None = None, package: str | None = None,
                 group: str | None = None):
        self.kind = kind
        self.error = error
        self.modules: dict[str, str] = dict(modules or {})
        self.factories: dict[str, F] = {}
        self.package = package  # e.g. "jsbench.suites": every public module in it may register names
        self.group = group  # e.g. "jsbench.suites": other packages' entry points add names
        self.origins: dict[str, str] = {}  # name -> the plugin distribution that registered it
        self._scanned = False
        self._failed: dict[str, str] = {}  # module -> why it did not import (shown with an unknown name)

    def register(self, name: str) -> Callable[[F], F]:
        def deco(factory: F) -> F:
            self.factories[name] = factory
            return factory

        return deco

    def _scan(self) -> None:
        """Import the package's public modules (not `_private` ones) once; each registers what it defines.
        A module that fails to import is remembered, not raised: the name asked for may live elsewhere."""
        if self._scanned or self.package is None:
            return
        self._scanned = True
        for info in pkgutil.iter_modules(importlib.import_module(self.package).__path__):
            if info.name.startswith("_"):
                continue
            module = f"{self.package}.{info.name}"
            try:
                importlib.import_module(module)
            except Exception as exc:  # an optional dependency missing, or a broken new module
                self._failed[module] = f"{exc.__class__.__name__}: {exc}"

    def builtin_names(self) -> list[str]:
        self._scan()
        return sorted(set(self.modules) | (set(self.factories) - set(self.origins)))

    def plugin_names(self) -> list[str]:
        """Names other packages' entry points add (not loaded; a name jsbench registers itself is not theirs)."""
        if self.group is None:
            return []
        own = set(self.builtin_names())
        return [e.name for e in plugin_entries(self.group) if e.name not in own]

    def names(self) -> list[str]:
        return sorted(set(self.builtin_names()) | set(self.plugin_names()) | set(self.factories))

    def origin(self, name: str) -> str:
        """Where `name` comes from: jsbench, or the plugin distribution that declares it."""
        if name in self.builtin_names():
            return JSBENCH_ORIGIN
        entry = plugin_entry(self.group, name) if self.group else None
        return entry.origin if entry is not None else self.origins.get(name, JSBENCH_ORIGIN)

    def _load_plugin(self, name: str) -> None:
        entry = plugin_entry(self.group, name) if self.group else None
        if entry is None:
            return
        factory = entry.load(self.error)
        if not callable(factory):
            raise entry.refuse(f"names {type(factory).__name__} {factory!r}, not a {self.kind} factory", self.error)
        self.factories[name] = factory
        self.origins[name] = entry.origin

    def get(self, name: str) -> F:
        if name not in self.factories and name in self.modules:
            importlib.import_module(self.modules[name])
        if name not in self.factories:
            self._scan()
        if name not in self.factories:
            self._load_plugin(name)
        if name not in self.factories:
            failed = "".join(f" ({m} did not import: {why})" for m, why in sorted(self._failed.items()))
            raise self.error(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}{failed}")
        return self.factories[name]


def declared_names(package: str, table: str = "_MODULES") -> tuple[str, ...]:
    """The names a package declares in its `table = {name: module, ...}` literal, read from its source
    without importing it (the backbones' package imports torch; `jsbench --help` lists their names fast)."""
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(package)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if node.value is not None and any(getattr(t, "id", None) == table for t in targets):
            return tuple(ast.literal_eval(node.value))
    raise LookupError(f"{package} declares no {table}")


def declared_records(package: str, table: str) -> list[dict]:
    """The literal arguments of each record call (`Record("name", ..., key=literal)`) in a module's `table = ...`
    assignment, read from its source without importing it: {"name": first argument, key: value, ...} in order
    (baselines.py imports torch; `jsbench train --help` names the baselines fast). Non-literal arguments are left out."""
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(package)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if node.__dict__.get("value") is None or not any(getattr(t, "id", None) == table for t in targets):
            continue
        calls = sorted((c for c in ast.walk(node.value) if isinstance(c, ast.Call) and c.args and isinstance(c.args[0], ast.Constant)),
                       key=lambda c: (c.lineno, c.col_offset))
        return [{"name": c.args[0].value, **{k.arg: k.value.value for k in c.keywords if isinstance(k.value, ast.Constant)}} for c in calls]
    raise LookupError(f"{package} declares no {table}")

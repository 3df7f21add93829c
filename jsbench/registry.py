"""Named factories, looked up lazily: the one mechanism behind backbones, rewards, suites and OCR engines.

A module registers a factory under a name with `@registry.register("name")`. Names can also be
declared up front as `name -> module` so that looking one up imports only that module (the analytic
backbone never pays for diffusers). A registry given its `package` also finds names nobody declared:
on a miss it imports the package's public modules once, so adding a reward or a suite is adding one
file. An unknown name is one line listing the known ones (and any module that failed to import).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, TypeVar

from jsbench import JsbenchError

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    def __init__(self, kind: str, error: type[JsbenchError], modules: dict[str, str] | None = None, package: str | None = None):
        self.kind = kind
        self.error = error
        self.modules: dict[str, str] = dict(modules or {})
        self.factories: dict[str, F] = {}
        self.package = package  # e.g. "jsbench.suites": every public module in it may register names
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

    def names(self) -> list[str]:
        self._scan()
        return sorted(set(self.modules) | set(self.factories))

    def get(self, name: str) -> F:
        if name not in self.factories and name in self.modules:
            importlib.import_module(self.modules[name])
        if name not in self.factories:
            self._scan()
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

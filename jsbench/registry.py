"""Named factories, looked up lazily: the one mechanism behind backbones, rewards, suites and OCR engines.

A module registers a factory under a name with `@registry.register("name")`. Names can also be
declared up front as `name -> module` so that looking one up imports only that module (the analytic
backbone never pays for diffusers). An unknown name is one line listing the known ones.
"""

from __future__ import annotations

import importlib
from typing import Callable, Generic, TypeVar

from jsbench import JsbenchError

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    def __init__(self, kind: str, error: type[JsbenchError], modules: dict[str, str] | None = None):
        self.kind = kind
        self.error = error
        self.modules: dict[str, str] = dict(modules or {})
        self.factories: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        def deco(factory: F) -> F:
            self.factories[name] = factory
            return factory

        return deco

    def names(self) -> list[str]:
        return sorted(set(self.modules) | set(self.factories))

    def get(self, name: str) -> F:
        if name not in self.factories and name in self.modules:
            importlib.import_module(self.modules[name])
        if name not in self.factories:
            raise self.error(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}")
        return self.factories[name]

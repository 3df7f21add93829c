"""What is registered, and from where: every backbone, suite, schedule source and baseline, jsbench's own and
those other packages add through entry points (groups `jsbench.backbones`, `jsbench.suites`,
`jsbench.schedules`, `jsbench.baselines`; docs/plugins.md). `jsbench plugins` prints it."""

from __future__ import annotations

from dataclasses import dataclass

from jsbench import JsbenchError


@dataclass(frozen=True)
class Registered:
    kind: str  # "backbone", "suite", "schedule source", "baseline"
    name: str  # as a user spells it: a schedule source's syntax ("karras[:RHO]")
    origin: str  # "jsbench", or the plugin's distribution and version


def _from_registry(kind: str, registry, problems: list[str], check=None) -> list[Registered]:
    """Every name of `registry`, each loaded (`registry.get`, then `check(name)` where given: a suite's class and
    its declarations); one that does not load or check is its one line in `problems`."""
    out = []
    for name in registry.names():
        try:
            registry.get(name)  # a plugin loads here: a broken one is its one line, not a traceback
            if check is not None:
                check(name)
        except JsbenchError as exc:
            problems.append(str(exc))
            continue
        out.append(Registered(kind, name, registry.origin(name)))
    return out


def registered() -> tuple[list[Registered], list[str]]:
    """(everything registered, one line per plugin that did not load)."""
    from jsbench.backbones import _REGISTRY as backbones
    from jsbench.baselines import registered_baselines
    from jsbench.suites import _REGISTRY as suites
    from jsbench.suites import suite_class
    from jsbench.zoo.registry import schedule_kinds

    problems: list[str] = []
    rows = _from_registry("backbone", backbones, problems) + _from_registry("suite", suites, problems, check=suite_class)
    rows += [Registered("schedule source", k.syntax, k.origin) for k in schedule_kinds(errors=problems)]
    rows += [Registered("baseline", b.name, b.origin) for b in registered_baselines(errors=problems)]
    return rows, problems


def listing(rows: list[Registered], problems: list[str]) -> str:
    """One block per kind, one line per name with its origin; then the plugins that did not load."""
    lines = []
    for kind in ("backbone", "suite", "schedule source", "baseline"):
        mine = [r for r in rows if r.kind == kind]
        lines.append(f"{kind}s ({len(mine)})")
        lines += [f"  {r.name:<24} {r.origin}" for r in mine]
    if problems:
        lines.append(f"did not load ({len(problems)})")
        lines += [f"  {p}" for p in problems]
    return "\n".join(lines) + "\n"

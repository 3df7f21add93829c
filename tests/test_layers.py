"""Imports run downward: the layer rules of jsbench, checked on the source (ast), lazy imports included.

A unit is a top-level module or subpackage ("wing") of jsbench. Layers, bottom to top; a unit imports only
units of layers below its own (the base layer not even each other), and every unit of jsbench is in one:
   0  base: jsbench (the error types), io, splits, stats, registry, schedule, devices, host_memory, progress,
      workspace, distributed: import nothing of jsbench but the errors
   1  baselines: REINFORCE's reward baselines, pure functions of a reward tensor (a plugin point: the registry)
   2  scoring: GenEval's rules and tables, MARIO-Eval's metrics; no model inside
   3  world: the embedded world and its evaluator
   4  backbones (the analytic and detail backbones draw the world)
   5  rewards
   6  suites
   7  policy: the schedule policies' networks, their files, a run's convergence verdict
   8  zoo: the schedule sources (`policy:PATH` loads a policy)
   9  evaluation: sampling and scoring a schedule source on a suite, its records, a run filed
  10  train: the REINFORCE loop, its config, the peer methods' steps, the scenes-dit backbone's training
  11  report: compare, leaderboards and their statistics, the regression check, plots, the plan of a run
  12  analysis: the estimator lab and the studies behind scripts/ (costs, calibration, agreement, ...)
  13  the command line's declarations: cli_options, plugins
  14  commands: what each command does
  15  cli
  16  __main__
A registry's `name -> "jsbench.module"` string counts as an import of that module.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

import jsbench

ROOT = Path(jsbench.__file__).resolve().parent
BASE = ("jsbench", "jsbench.io", "jsbench.splits", "jsbench.stats", "jsbench.registry", "jsbench.schedule", "jsbench.devices",
        "jsbench.host_memory", "jsbench.progress", "jsbench.workspace", "jsbench.distributed")
LAYERS = (
    BASE,
    ("jsbench.baselines",),
    ("jsbench.scoring",),
    ("jsbench.world",),
    ("jsbench.backbones",),
    ("jsbench.rewards",),
    ("jsbench.suites",),
    ("jsbench.policy",),
    ("jsbench.zoo",),
    ("jsbench.evaluation",),
    ("jsbench.train",),
    ("jsbench.report",),
    ("jsbench.analysis",),
    ("jsbench.cli_options", "jsbench.plugins"),
    ("jsbench.commands",),
    ("jsbench.cli",),
    ("jsbench.__main__",),
)
RANK = {unit: level for level, units in enumerate(LAYERS) for unit in units}
MODEL_LIBRARIES = ("torch", "transformers", "diffusers", "open_clip", "rapidocr_onnxruntime", "easyocr", "pytesseract")


def _unit(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else "jsbench"


def _modules() -> dict[str, Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        rel = f.relative_to(ROOT.parent).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = f
    return out


MODULES = _modules()


@lru_cache(maxsize=None)
def imports_of(module: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import in `module`'s source, at any depth, relative ones
    resolved, plus every string constant that names a jsbench module (a registry's lazy entry)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            out.append((source, node.lineno))
            # `from jsbench import train` or `from . import ocr` imports a module, not a name of the package
            out += [(f"{source}.{a.name}", node.lineno) for a in node.names if f"{source}.{a.name}" in MODULES]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES and node.value != "jsbench":
            out.append((node.value, node.lineno))
    return out


@lru_cache(maxsize=1)
def unit_edges() -> dict[tuple[str, str], list[str]]:
    """(importer unit, imported unit) -> where, for imports between different units of jsbench."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module in MODULES:
        for target, line in imports_of(module):
            if target and (target == "jsbench" or target.startswith("jsbench.")) and _unit(target) != _unit(module):
                edges.setdefault((_unit(module), _unit(target)), []).append(f"{module}:{line}")
    return edges


def cycles(edges) -> list[list[str]]:
    """The strongly connected components with more than one unit (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_parser_sees_imports_lazy_ones_and_registry_strings():
    edges = unit_edges()
    assert ("jsbench.suites", "jsbench.rewards") in edges  # suites/ocr.py's top-level import
    assert any(w.startswith("jsbench.rewards.detectors:") for w in edges[("jsbench.rewards", "jsbench.world")])  # a lazy one
    registry = [t for t, _ in imports_of("jsbench.rewards") if t.startswith("jsbench.rewards.")]
    assert {"jsbench.rewards.geneval", "jsbench.rewards.ocr", "jsbench.rewards.clip"} <= set(registry)


def _probe(tmp_path, monkeypatch, module: str, source: str) -> None:
    """A module `module` whose source is `source`, seen by the parser for the rest of the test."""
    path = tmp_path / "probe.py"
    path.write_text(source)
    monkeypatch.setitem(MODULES, module, path)
    imports_of.cache_clear()
    unit_edges.cache_clear()


@pytest.fixture
def fresh_parse():
    yield
    imports_of.cache_clear()
    unit_edges.cache_clear()


def test_the_parser_sees_a_module_imported_by_name_from_its_package(tmp_path, monkeypatch, fresh_parse):
    """`from jsbench.report import compare` is an import of jsbench.report.compare, and `from jsbench import zoo` of
    jsbench.zoo, not of the errors in jsbench/__init__."""
    _probe(tmp_path, monkeypatch, "jsbench.world.probe",
           "from jsbench.report import compare\nfrom jsbench import zoo\nfrom jsbench import JsbenchError\n")
    found = [t for t, _ in imports_of("jsbench.world.probe")]
    assert {"jsbench.report.compare", "jsbench.zoo"} <= set(found) and "jsbench.JsbenchError" not in found


def test_cycle_finder_finds_a_cycle():
    assert cycles({("a", "b"): [], ("b", "c"): [], ("c", "a"): [], ("c", "d"): []}) == [["a", "b", "c"]]
    assert cycles({("a", "b"): [], ("b", "c"): []}) == []


def test_scoring_imports_only_the_bottom_layer_and_no_model():
    for module in [m for m in MODULES if _unit(m) == "jsbench.scoring"]:
        for target, line in imports_of(module):
            if target == "jsbench" or target.startswith("jsbench."):
                assert _unit(target) in ("jsbench", "jsbench.io", "jsbench.splits", "jsbench.scoring"), f"{module}:{line} imports {target}"
            assert target.split(".")[0] not in MODEL_LIBRARIES, f"{module}:{line} imports {target}: scoring holds no model"


def upward(unit: str) -> set[str]:
    """`unit`'s imports of a unit in its own layer or above (the errors in jsbench/__init__ are everyone's)."""
    return {
        f"{a} -> {b} ({', '.join(where)})"
        for (a, b), where in unit_edges().items()
        if a == unit and b != "jsbench" and RANK.get(b, len(LAYERS)) >= RANK[a]  # layer 0: not even each other
    }


def test_every_unit_of_jsbench_is_in_a_layer():
    """A new module at jsbench's root or a new wing is placed in the order, not waved through: the root holds the
    base layer, the reward baselines and the command line; everything else lives in a wing."""
    units = {_unit(m) for m in MODULES}
    assert units - set(RANK) == set(), f"units in no layer (add them to LAYERS): {sorted(units - set(RANK))}"
    assert set(RANK) - units == set(), f"layers name units that do not exist: {sorted(set(RANK) - units)}"


def test_the_wings_are_ordered():
    wings = ["jsbench.policy", "jsbench.zoo", "jsbench.evaluation", "jsbench.train", "jsbench.report", "jsbench.analysis", "jsbench.commands"]
    assert [RANK[w] for w in wings] == sorted({RANK[w] for w in wings}), "each wing above the one before it"
    assert RANK["jsbench.suites"] < RANK["jsbench.policy"] and RANK["jsbench.commands"] < RANK["jsbench.cli"]


@pytest.mark.parametrize("lower, higher", [("jsbench.policy", "jsbench.evaluation.results"), ("jsbench.evaluation", "jsbench.train.reinforce"),
                                           ("jsbench.train", "jsbench.report.compare"), ("jsbench.report", "jsbench.analysis.estimators"),
                                           ("jsbench.evaluation", "jsbench.evaluation.probe_peer"), ("jsbench.io", "jsbench.stats")])
def test_an_import_up_the_order_fails_the_layer_rule(tmp_path, monkeypatch, fresh_parse, lower, higher):
    """The rule catches a lower wing reaching up, lazily too (and a base module importing another base module)."""
    _probe(tmp_path, monkeypatch, f"{lower}.probe", f"def f():\n    import {higher}\n")
    if higher.endswith("probe_peer"):  # an import inside one wing is no edge between units
        assert not upward(lower)
    else:
        assert any(f"{lower}.probe:2" in edge for edge in upward(lower)), upward(lower)


@pytest.mark.parametrize("unit", sorted(RANK))
def test_layers_import_only_downward(unit):
    found = upward(unit)
    assert not found, "imports that do not run downward: " + "; ".join(sorted(found))


def test_the_process_group_module_imports_only_the_bottom_layer():
    """distributed.py is the process group and its launcher: sharded evaluation lives in evaluation/evaluate.py,
    so the module training, evaluation and the lab all use sits in the bottom layer."""
    for target, line in imports_of("jsbench.distributed"):
        if target == "jsbench" or target.startswith("jsbench."):
            assert _unit(target) in BASE, f"jsbench.distributed:{line} imports {target}"


def test_no_import_cycle_between_units():
    assert cycles(unit_edges()) == []


MAX_LINES = 500  # a module longer than this holds more than one responsibility; the backbone adapters are exempt


def test_no_module_over_500_lines_outside_the_backbone_adapters():
    long = {m: n for m, path in MODULES.items() if _unit(m) != "jsbench.backbones" and (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by responsibility): {long}"


def test_each_reward_registers_in_rewards_and_each_suite_in_suites():
    for module, path in MODULES.items():
        text = path.read_text()
        if "@register_reward(" in text:
            assert _unit(module) == "jsbench.rewards", f"{module} registers a reward"
        if "@register_suite(" in text:
            assert _unit(module) == "jsbench.suites", f"{module} registers a suite"

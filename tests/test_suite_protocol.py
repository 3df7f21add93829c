"""Suites declare themselves (issue 37 item 1), as backbones do: what the rest of jsbench knows of a suite is a
class attribute or method of its class (`jsbench.suites.base.Suite`), read from the class without building it.

- every registered suite's class declares the protocol, with the values the name-keyed tables held before
  (protocol.PROTOCOL_SEEDS, leaderboard.OVERALL_RULES), and every class it builds offers the calls;
- no module reads a declared member with getattr/hasattr and a fallback, nor keeps a table keyed by suite name;
- a plugin's suite that declares the protocol works without a line of jsbench edited (an entry point on
  sys.path, no install): it is listed, evaluated, compared, planned and preflighted by its declarations; one
  that does not is refused in one line, and these checks reject it.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

import jsbench
from jsbench.suites import IncompleteSuite, available_suites, suite_class
from jsbench.suites.base import CALLS, DECLARED, REQUIRED, TASK_MEAN_RULE, Suite, declaration_problems, missing_calls

ROOT = Path(jsbench.__file__).resolve().parent

# what the tables outside jsbench/suites/ held before the suites declared it, per suite of that time:
# (protocol_seeds: PROTOCOL_SEEDS, overall_rule: OVERALL_RULES or its default, primary_metric, leaderboard_metrics).
# A suite added since needs no line here.
EXPECTED = {
    "geneval": (4, TASK_MEAN_RULE, "correct", ()),
    "hpdv2": (1, TASK_MEAN_RULE, "hps", ()),
    "ocr": (4, "overall = every image pooled, as MARIO-Eval pools", "accuracy", ("accuracy", "precision", "recall", "f_measure")),
}


def built_classes(cls: type) -> list[type]:
    """The classes a suite builds: its class, or where that class only declares (geneval's, which its factory
    annotates), the subclasses its module defines below it that nothing there subclasses further."""
    family = [c for c in _subclasses(cls) if c.__module__ == cls.__module__]
    return [c for c in family if not any(d is not c and issubclass(d, c) for d in family)] or [cls]


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += [c for c in _subclasses(sub) if c not in out]
    return out


def suite_problems(cls) -> list[str]:
    """The protocol test's verdict on a suite class: what it does not declare, and the calls a class it builds lacks."""
    problems = declaration_problems(cls)
    if problems:
        return problems
    return [f"{c.__name__} lacks {', '.join(missing_calls(c))}" for c in built_classes(cls) if missing_calls(c)]


def test_the_protocol_declares_the_suite_knowledge():
    assert set(REQUIRED) == {"name", "primary_metric", "protocol_seeds", "overall_rule"}
    assert {"leaderboard_metrics", "provenance", "preflight", "unrecorded_provenance", *CALLS} <= set(DECLARED)
    # the members with a default say "nothing": no further metrics, no provenance, no preflight check
    assert (Suite.leaderboard_metrics, Suite.all_leaderboard_metrics, Suite.leaderboard_about) == ((), (), "")
    assert dict(Suite.unrecorded_provenance) == {} and Suite().provenance() == {} and Suite.preflight(object) is None


@pytest.mark.parametrize("name", sorted(available_suites()))
def test_every_registered_suite_class_declares_the_protocol(name):
    cls = suite_class(name)  # refuses, in one line, a suite that does not declare it
    assert suite_problems(cls) == []
    assert cls.name == name
    if name in EXPECTED:
        assert (cls.protocol_seeds, cls.overall_rule, cls.primary_metric, cls.leaderboard_metrics) == EXPECTED[name]


def test_the_pinned_suites_are_registered_and_read_by_their_declarations():
    from jsbench.evaluation.protocol import EMBEDDED_SEEDS, default_seeds

    assert set(EXPECTED) <= set(available_suites())
    assert {n: default_seeds(n, real=True) for n in EXPECTED} == {n: v[0] for n, v in EXPECTED.items()}
    assert {default_seeds(n, real=False) for n in EXPECTED} == {EMBEDDED_SEEDS}
    # geneval builds two classes, both declaring what GenEval declares
    assert sorted(c.__name__ for c in built_classes(suite_class("geneval"))) == ["GenEvalSuite", "RealGenEvalSuite"]


def test_a_suite_refines_its_declarations_per_instance():
    from jsbench.suites import load_suite

    mario = load_suite("ocr", protocol="mario")
    assert (mario.primary_metric, mario.leaderboard_metrics) == ("accuracy", ("accuracy", "precision", "recall", "f_measure"))
    assert set(mario.leaderboard_metrics) <= set(suite_class("ocr").all_leaderboard_metrics)


# ---- no getattr fallbacks, no table keyed by suite name --------------------------------------------------

SUITE_NAMES = {"suite", "s", "suite_cls"}  # what jsbench calls a suite or its class
SUITE_ATTRS = {"suite", "_suite"}  # ... and `self.suite`, `trainer.suite`
# members no other object of jsbench has: read off anything with getattr, they are a suite's read with a fallback
OWN = {"protocol_seeds", "overall_rule", "leaderboard_metrics", "all_leaderboard_metrics", "leaderboard_about", "unrecorded_provenance",
       "preflight"}


def _is_suite(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in SUITE_NAMES) or (isinstance(node, ast.Attribute) and node.attr in SUITE_ATTRS)


def declared_reads(source: str, filename: str = "<source>") -> list[str]:
    """`getattr(<suite>, "<declared member>", ...)`, `hasattr(...)` and `getattr(<anything>, "<a suite's own
    member>")` calls in `source` (a module found through sys.modules included), as 'file:line'."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and (node.args[1].value in OWN or (_is_suite(node.args[0]) and node.args[1].value in DECLARED))):
            out.append(f"{filename}:{node.lineno} {ast.unparse(node)}")
    return out


def test_the_check_finds_the_reads_it_forbids():
    old = '''
rule = getattr(suite, "overall_rule", "overall = mean of the task means")
unrecorded = getattr(suite, "unrecorded_provenance", None) or {}
if getattr(self.suite, "leaderboard_metrics", ()): pass
scorer = suite.provenance() if callable(getattr(suite, "provenance", None)) else {}
check = getattr(sys.modules[_REGISTRY.get(name).__module__], "preflight", None)
'''
    assert len(declared_reads(old)) == 5
    # another object's provenance (a reward's), or a member the protocol does not declare, is not the check's business
    assert declared_reads('getattr(self.reward, "provenance", None); getattr(suite, "protocol", None)') == []


def test_no_module_reads_a_declared_suite_member_with_getattr():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += declared_reads(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT.parent)))
    assert not found, "read these as plain attributes (every suite declares them):\n" + "\n".join(found)


def name_keyed_tables(source: str, names: set[str], filename: str = "<source>") -> list[str]:
    """Dict literals in `source` whose keys are all suite names (PROTOCOL_SEEDS, OVERALL_RULES), as 'file:line'."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if (isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Constant) and k.value in names for k in node.keys)):
            out.append(f"{filename}:{node.lineno} {ast.unparse(node)[:80]}")
    return out


def test_no_module_outside_the_suites_keeps_a_table_keyed_by_suite_name():
    names = set(available_suites())
    assert len(name_keyed_tables('SEEDS = {"geneval": 4, "hpdv2": 1, "ocr": 4}\nRULES = {"ocr": "pooled"}\nW = {"ocr": 1, "x": 2}', names)) == 2
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.parent.name != "suites":
            found += name_keyed_tables(path.read_text(encoding="utf-8"), names, str(path.relative_to(ROOT.parent)))
    assert not found, "declare these on the suite classes (jsbench/suites/base.py):\n" + "\n".join(found)


# ---- a plugin's suite: declared, it works without editing jsbench; undeclared, it is refused -------------

PLUGIN = '''"""A tiny suite from another package: two prompts of the scene world, scored by brightness."""

from jsbench import JsbenchError
from jsbench.suites.base import EvalItem, Suite, aggregate_by_task


class TinySuite(Suite):
    name = "tiny"
    primary_metric = "brightness"
    protocol_seeds = 3
    overall_rule = "overall = mean brightness of the task means"
    leaderboard_metrics = ("brightness", "spread")
    leaderboard_about = "Tiny: brightness and spread of two scene prompts."

    def __init__(self, backbone=None, **options):
        self.backbone = backbone

    @classmethod
    def preflight(cls, backbone=None):
        if backbone is not None and not backbone.draws_text:
            raise JsbenchError(f"the tiny suite reads text, and {backbone.name} draws none")

    def provenance(self):
        return {"reward_model": "tiny-brightness"}

    def items(self, split="test"):
        return [EvalItem(p, "scene") for p in ("a photo of a triangle", "a triangle")]

    def score(self, images, items):
        return [{"brightness": float(x.mean()), "spread": float(x.std())} for x in images]

    def aggregate(self, scores, items):
        return aggregate_by_task(scores, items)


class Forgetful(Suite):  # what a suite written before the protocol looks like: no protocol_seeds, no overall_rule
    name = "forgetful"
    primary_metric = "brightness"
    items, score, aggregate = TinySuite.items, TinySuite.score, TinySuite.aggregate
'''


@pytest.fixture
def tiny_plugin(tmp_path, monkeypatch):
    """The plugin's module and its dist-info on sys.path (the entry points a pip install would write), and the
    suites' registry restored after the test."""
    from jsbench.suites import _REGISTRY

    site = tmp_path / "site"
    info = site / "tiny_suite_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-suite-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[jsbench.suites]\ntiny = tiny_suite_plugin:TinySuite\nforgetful = tiny_suite_plugin:Forgetful\n")
    (site / "tiny_suite_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(_REGISTRY, "factories", dict(_REGISTRY.factories))
    monkeypatch.setattr(_REGISTRY, "origins", dict(_REGISTRY.origins))
    yield site
    sys.modules.pop("tiny_suite_plugin", None)


def test_a_plugin_suite_that_declares_the_protocol_works_without_editing_jsbench(tiny_plugin, tmp_path, cli):
    import tiny_suite_plugin

    from jsbench.suites import load_suite

    # the protocol test's checks accept the declared suite and reject the other, naming what it lacks
    assert suite_problems(tiny_suite_plugin.TinySuite) == []
    assert suite_problems(tiny_suite_plugin.Forgetful) == ["does not declare protocol_seeds, overall_rule"]
    assert {"tiny", "forgetful"} <= set(available_suites()) and suite_class("tiny") is tiny_suite_plugin.TinySuite
    with pytest.raises(IncompleteSuite, match=r"^suite 'forgetful' \(Forgetful\): does not declare protocol_seeds, overall_rule"):
        load_suite("forgetful")

    code, out, err = cli("plugins")  # listed with its package; the undeclared one is one line, and exit 1
    assert code == 1 and "Traceback" not in out + err
    suites = out[out.index("suites ("):out.index("schedule sources (")]
    assert any(line.split() == ["tiny", "tiny-suite-plugin", "0.1"] for line in suites.splitlines())
    assert "did not load (1)" in out and "'forgetful'" in out and "protocol_seeds" in out
    code, out, err = cli("eval", "--suite", "forgetful", "--steps", "3", "--seeds", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "does not declare protocol_seeds" in err

    # eval: its provenance in every record; its preflight refuses a backbone before any weights load
    code, out, err = cli("eval", "--suite", "tiny", "--steps", "3", "--seeds", "1", "--out", tmp_path / "r.jsonl", "--no-progress")
    assert code == 0, err
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert {(r["suite"], r["reward_model"]) for r in records} == {("tiny", "tiny-brightness")}
    code, out, err = cli("eval", "--suite", "tiny", "--backbone", "detail", "--steps", "3", "--out", tmp_path / "d.jsonl")
    assert code == 2 and err.strip() == "error: the tiny suite reads text, and detail draws none"

    # compare: the page states its overall rule, and its further metrics get their table
    lb = tmp_path / "lb"
    code, out, err = cli("compare", "--suite", "tiny", "--steps", "3", "--seeds", "1", "--zoo", "none", "--policies", tmp_path / "none",
                         "--leaderboards", lb, "--records", tmp_path / "c.jsonl", "--no-plots", "--no-progress")
    assert code == 0, err
    page = (lb / "tiny.md").read_text()
    assert "Metric: `brightness` (overall = mean brightness of the task means)." in page
    assert "reward model `tiny-brightness`." in page
    assert "## Further metrics" in page and "Tiny: brightness and spread of two scene prompts." in page
    assert {row.split(",")[5] for row in (lb / "tiny.metrics.csv").read_text().splitlines()[1:]} == {"brightness", "spread"}

    # a real model's default images per prompt are its declared protocol's (read without building anything)
    code, out, err = cli("compare", "--plan", "--suite", "tiny", "--backbone", "sdxl", "--steps", "4", "--zoo", "none", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["rows"][0]["images"] == 2 * 3

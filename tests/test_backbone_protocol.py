"""Backbone knowledge lives on the Backbone protocol (issue 13 item 5), and a table's step budget is recorded
apart from the steps a row ran.

- every registered backbone's class declares each attribute the protocol declares (read without weights,
  through `backbone_class`), with the values the code used to fall back to when one was missing;
- no module of jsbench reads a protocol attribute off a backbone with getattr/hasattr and a fallback;
- a distilled row runs its own default steps and is filed under the section's budget, the ceiling sits in
  every section, and records written before they carried a budget still load into the same sections.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import jsbench
from jsbench.backbones import available_backbones, backbone_class
from jsbench.backbones.base import DEFAULT_CEILING_STEPS, Backbone

ROOT = Path(jsbench.__file__).resolve().parent
# set per instance at construction (the weights' folder, the device, the dtype), not knowledge of the class
INSTANCE_ATTRS = {"model_id", "device", "dtype"}
DECLARED = sorted(set(Backbone.__annotations__) - INSTANCE_ATTRS)
# what the code read with getattr before the protocol declared it, per backbone of that time: (default_steps,
# ceiling_steps, draws_embedded_world, geneval_world's name, eval_batch). A backbone added since needs no line here.
EXPECTED = {
    "analytic": (None, 200, True, None, None),
    "detail": (None, 200, True, "DetailWorld", None),
    "scenes-dit": (28, 50, True, None, 16),
    "sdxl": (50, 200, False, None, 16),
    "sd35": (28, 200, False, None, 16),
    "sd35-medium": (28, 200, False, None, 16),
    "sd35-large": (28, 200, False, None, 8),
    "flux-dev": (28, 200, False, None, 8),
    "flux-schnell": (4, 200, False, None, 8),
}


def test_the_protocol_declares_the_backbone_knowledge():
    for attr in ("default_steps", "ceiling_steps", "draws_embedded_world", "geneval_world", "decode_chunk", "eval_batch",
                 "train_batch", "velocity", "max_steps", "name", "velocity_dtype", "clock_kind", "ays_schedule"):
        assert attr in DECLARED


@pytest.mark.parametrize("name", sorted(available_backbones()))
def test_every_registered_backbone_class_declares_the_protocol(name):
    cls = backbone_class(name)
    assert cls is not None, f"{name}: its factory has no return annotation naming its class"
    missing = [a for a in DECLARED if not hasattr(cls, a)]
    assert not missing, f"{cls.__name__} does not declare {missing}"
    assert isinstance(cls.ceiling_steps, int) and 1 <= cls.ceiling_steps <= cls.max_steps
    assert cls.default_steps is None or (isinstance(cls.default_steps, int) and 1 <= cls.default_steps <= cls.max_steps)
    assert isinstance(cls.draws_embedded_world, bool)
    assert cls.geneval_world is None or isinstance(cls.geneval_world, type)
    for size in (cls.decode_chunk, cls.eval_batch, cls.train_batch):
        assert size is None or (isinstance(size, int) and size >= 1)
    assert cls.velocity is None or callable(cls.velocity)
    if name in EXPECTED:
        world = cls.geneval_world.__name__ if cls.geneval_world is not None else None
        assert (cls.default_steps, cls.ceiling_steps, cls.draws_embedded_world, world, cls.eval_batch) == EXPECTED[name]


# the clock each backbone's sampler integrates and its Align Your Steps entry, declared since the schedule zoo
# stopped probing for them (hasattr ve_start, a table keyed by backbone name): (clock_kind, ays_schedule, velocity?)
CLOCKS = {
    "analytic": ("flow", None, True),
    "detail": ("flow", None, True),
    "scenes-dit": ("flow", None, True),
    "sdxl": ("discrete", "StableDiffusionXLSigmas", False),
    "sd35": ("flow", None, True),
    "sd35-medium": ("flow", None, True),
    "sd35-large": ("flow", None, True),
    "flux-dev": ("flow", None, True),
    "flux-schnell": ("flow", None, True),
}


@pytest.mark.parametrize("name", sorted(available_backbones()))
def test_every_backbone_declares_its_clock_and_a_velocity_where_it_has_one(name):
    import torch

    from jsbench.backbones.base import CLOCK_KINDS, DiscreteClock

    cls = backbone_class(name)
    assert cls.clock_kind in CLOCK_KINDS
    assert cls.ays_schedule is None or (isinstance(cls.ays_schedule, str) and cls.clock_kind == "discrete")
    if cls.velocity is not None:  # a velocity says the precision it returns
        assert cls.clock_kind == "flow" and cls.velocity_dtype in (torch.float32, torch.float64)
    else:
        assert cls.velocity_dtype is None
    if cls.clock_kind == "discrete":
        calls = [m for m in DiscreteClock.__dict__ if not m.startswith("_") and m != "table"]
        assert calls and all(hasattr(cls, m) for m in calls), f"{cls.__name__} lacks a DiscreteClock call"
    if name in CLOCKS:
        assert (cls.clock_kind, cls.ays_schedule, cls.velocity is not None) == CLOCKS[name]


def test_the_pinned_backbones_are_registered():
    assert set(EXPECTED) <= set(available_backbones())
    assert set(CLOCKS) <= set(available_backbones())
    assert DEFAULT_CEILING_STEPS == 200


# ---- no getattr fallbacks for protocol attributes ---------------------------------------------------------

BACKBONE_NAMES = {"backbone", "bb", "other", "cls", "backbone_cls"}  # what jsbench calls a backbone or its class
BACKBONE_ATTRS = {"backbone", "_bb"}  # ... and `self.backbone`, `trainer.backbone`, a wrapper's `_bb`


def _is_backbone(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in BACKBONE_NAMES) or (isinstance(node, ast.Attribute) and node.attr in BACKBONE_ATTRS)


def protocol_reads(source: str, filename: str = "<source>") -> list[str]:
    """`getattr(<backbone>, "<declared attribute>", ...)` and `hasattr(...)` calls in `source`, as 'file:line'."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and _is_backbone(node.args[0])
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in DECLARED):
            out.append(f"{filename}:{node.lineno} {ast.unparse(node)}")
    return out


def test_the_check_finds_the_reads_it_forbids():
    old = '''
n = int(arg) if arg else int(getattr(backbone, "ceiling_steps", CEILING_STEPS))
own = int(getattr(other, "default_steps", steps))
world = getattr(self.backbone, "geneval_world", None)
if cls is None or getattr(cls, "draws_embedded_world", False): pass
if callable(getattr(backbone, "velocity", None)): pass
'''
    assert len(protocol_reads(old)) == 5
    # a non-backbone object, or an attribute the protocol does not declare, is not the check's business
    assert protocol_reads('getattr(config, "ceiling_steps", 1); getattr(backbone, "scheduler", None)') == []


def test_no_module_reads_a_protocol_attribute_with_getattr():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += protocol_reads(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT.parent)))
    assert not found, "read these as plain attributes (every backbone declares them):\n" + "\n".join(found)


# ---- a table's budget apart from the steps run ------------------------------------------------------------


def _record(method: str, steps: int, budget, value: float = 0.5, **extra):
    from jsbench.evaluation.results import Record

    return Record(
        backbone="analytic", model_id="jsbench/analytic-scenes", steps=steps, budget=budget, method=method, schedule="default",
        suite="geneval", task="overall", metric="correct", value=value, stderr=0.1, n_images=8, n_prompts=4, seeds=[0, 1],
        policy_checksum=None, jsbench_version="0", git_commit=None, created=1.0, **extra,
    )


def test_tables_file_rows_by_budget_and_old_records_load_into_the_same_sections(tmp_path):
    from dataclasses import asdict

    from jsbench.report.leaderboard import build_tables, render_csv
    from jsbench.evaluation.results import read_records

    recs = [_record("default", 3, 3), _record("default", 4, 4), _record("ceiling (200 steps)", 200, None, 0.9),
            _record("flux-schnell (4 steps, distilled)", 4, 3, 0.6), _record("flux-schnell (4 steps, distilled)", 4, 4, 0.6)]
    tables = build_tables(recs, "geneval", "correct")
    assert [t.steps for t in tables] == [3, 4]
    for t in tables:
        rows = {r["method"]: r["steps"] for r in t.rows}
        # the distilled row is in each budget's section (not one record replacing the other), shown at the
        # section's budget; the ceiling row, with no budget of its own, sits in every section at its steps
        assert rows == {"default": t.steps, "flux-schnell (4 steps, distilled)": t.steps, "ceiling (200 steps)": 200}
    # the same rows as written before records carried a budget: the distilled row's steps were its section's
    path = tmp_path / "records.jsonl"
    old = [_record("default", 3, 3), _record("default", 4, 4), _record("ceiling (200 steps)", 200, None, 0.9),
           _record("flux-schnell (4 steps, distilled)", 3, 3, 0.6), _record("flux-schnell (4 steps, distilled)", 4, 4, 0.6)]
    path.write_text("".join(json.dumps({k: v for k, v in asdict(r).items() if k != "budget"}) + "\n" for r in old))
    back = read_records(path)
    assert [r.budget for r in back] == [3, 4, None, 3, 4]
    assert render_csv(build_tables(back, "geneval", "correct")) == render_csv(tables)


@pytest.mark.slow
def test_a_distilled_row_records_its_own_steps_under_the_sections_budget(tmp_path):
    from jsbench.backbones.analytic import AnalyticBackbone
    from jsbench.report.compare import run_compare
    from jsbench.report.compare_request import CompareRequest
    from jsbench.evaluation.results import read_records
    from jsbench.suites import load_suite

    class Reference(AnalyticBackbone):
        ceiling_steps = 8  # a cheap ceiling: the test is about where rows are filed, not how good they are

    class Distilled(AnalyticBackbone):
        name = "analytic-distilled"
        default_steps = 2

    bb = Reference()
    suite = load_suite("geneval", bb)
    request = CompareRequest(steps=(3, 4), policies=tmp_path / "no-policies", records=tmp_path / "records.jsonl", leaderboards=tmp_path / "lb",
                             seeds=1, plots=False, progress=False, zoo="none")
    result = run_compare(request, bb, suite, distilled=[Distilled()], log=lambda m: None)
    overall = [r for r in read_records(tmp_path / "records.jsonl") if r.task == "overall"]
    distilled = [r for r in overall if "distilled" in r.method]
    assert sorted((r.steps, r.budget) for r in distilled) == [(2, 3), (2, 4)]  # steps run = its own default
    assert [(r.steps, r.budget) for r in overall if r.schedule == "ceiling"] == [(8, None)]  # once, for every budget
    assert sorted((r.steps, r.budget) for r in overall if r.schedule == "default" and r not in distilled) == [(3, 3), (4, 4)]
    assert [t.steps for t in result.tables] == [3, 4]
    for t in result.tables:
        assert {r["method"]: r["steps"] for r in t.rows} == {"default": t.steps, "analytic-distilled (2 steps, distilled)": t.steps,
                                                            "ceiling (8 steps)": 8}


# ---- a backbone missing a protocol attribute is refused where it is loaded --------------------------------


def test_load_backbone_refuses_a_backbone_missing_protocol_attributes_in_one_line(monkeypatch):
    from jsbench.backbones import IncompleteBackbone, _REGISTRY, load_backbone
    from jsbench.backbones.analytic import AnalyticBackbone
    from jsbench.backbones.base import PROTOCOL_ATTRS, missing_protocol_attrs

    class Partial(AnalyticBackbone):  # what a new adapter that forgot two declarations looks like
        pass

    for attr in ("clock_kind", "ceiling_steps"):
        monkeypatch.delattr(AnalyticBackbone, attr)  # restored after the test
    monkeypatch.setitem(_REGISTRY.factories, "partial-test", lambda model=None, device=None: Partial())
    with pytest.raises(IncompleteBackbone) as exc:
        load_backbone("partial-test")
    message = str(exc.value)
    assert "\n" not in message and "'partial-test'" in message and "ceiling_steps, clock_kind" in message
    assert missing_protocol_attrs(Partial()) == ["ceiling_steps", "clock_kind"]
    monkeypatch.undo()
    # every attribute and call the protocol declares is checked, and a complete backbone passes
    assert {"clock_kind", "velocity", "sample", "encode", "pooled_dim", "device"} <= set(PROTOCOL_ATTRS)
    assert missing_protocol_attrs(load_backbone("analytic")) == []


# ---- sizes the harness reads live on the adapter classes --------------------------------------------------


def test_tiny_kinds_are_the_classes_that_declare_a_tiny_pipeline_in_registry_order():
    from jsbench.backbones.tiny import REAL_LATENT_SAMPLING, TINY_KINDS, TINY_SAMPLING

    # the kinds, order and sizes of the table tiny.py held before the adapters declared them
    assert TINY_KINDS == ("sdxl", "sd35", "flux-dev", "flux-schnell")
    small = {"height": 32, "width": 32}
    assert TINY_SAMPLING == {"sdxl": small, "sd35": {**small, "max_sequence_length": 64},
                             "flux-dev": {**small, "max_sequence_length": 64}, "flux-schnell": {**small, "max_sequence_length": 64}}
    assert all(REAL_LATENT_SAMPLING[k]["height"] == 256 for k in TINY_KINDS)
    for name in available_backbones():
        cls = backbone_class(name)
        own = cls.__dict__.get("tiny_sampling") is not None
        assert own == (name in TINY_KINDS), name  # sd35-medium/-large and scenes-dit inherit SD3.5's: not tiny kinds
        if own:
            assert callable(cls.tiny_pipeline)


def test_full_size_networks_and_text_lengths_are_declared_by_the_classes():
    counted = [n for n in available_backbones() if backbone_class(n).__dict__.get("full_size") is not None]
    assert sorted(counted) == sorted(["sdxl", "sd35", "sd35-large", "flux-dev", "flux-schnell"])
    for name in counted:
        spec = backbone_class(name).full_size
        assert {"network", "config", "latent_channels", "clip_len", "text_dim", "pooled", "cfg_batch"} <= set(spec)
    # T5 tokens per prompt (0: no T5) and the few-step sampler, formerly read with getattr / by name
    assert [backbone_class(n).max_sequence_length for n in ("sdxl", "sd35", "flux-dev", "flux-schnell")] == [0, 256, 512, 256]
    assert [n for n in counted if backbone_class(n).timestep_distilled] == ["flux-schnell"]

"""Every schedule source, jsbench's and any installed plugin's, resolves through one registry and is what its
`ScheduleKind` declares: its syntax names it, its behaviour is registered where it says, zoo rows carry a
leaderboard order, a declared teacher has a cost estimate, a declared `applies` is a check of a backbone
class, and every list of them (the --schedule help and error, --zoo's defaults, the teacher rows, a
leaderboard's order, the rows --plan leaves out) is generated from the declarations."""

from __future__ import annotations

import pytest
import torch

from jsbench.zoo import DEFAULT_ZOO, ZOO_KINDS
from jsbench.zoo.registry import (_REGISTRY, SOURCES, ScheduleKind, applies_to, schedule_kind, schedule_kinds, spec_syntax, teacher_cost,
                                  teacher_kinds, zoo_kind, zoo_rank)

KINDS = schedule_kinds()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_each_source_keeps_its_declaration(kind: ScheduleKind):
    assert kind.syntax.startswith(kind.name) and kind.summary
    assert callable(zoo_kind(kind.name).build)
    assert (kind.order is not None) == kind.zoo, "a zoo row declares its leaderboard order, nothing else does"
    assert not kind.default_zoo or kind.zoo
    assert kind.teacher is None or callable(teacher_cost(kind))
    assert kind.syntax in spec_syntax(KINDS)
    from jsbench.backbones import available_backbones, backbone_class

    for name in available_backbones():  # a check of the class alone: no weights, one line or None
        why = applies_to(kind, backbone_class(name))
        assert why is None or (kind.applies is not None and why and "\n" not in why)


def test_every_registered_builder_is_declared_and_the_lists_come_from_the_declarations():
    _REGISTRY.names()
    for name in [k.name for k in SOURCES]:
        zoo_kind(name)
    assert set(_REGISTRY.factories) == {k.name for k in SOURCES}
    assert ZOO_KINDS == ("karras", "exponential", "beta", "ays", "oss", "oss-mean", "oss-image", "searched", "file")
    assert DEFAULT_ZOO == ("karras", "ays", "oss", "oss-image", "searched")
    assert teacher_kinds() == ("oss", "oss-mean", "oss-image", "searched")
    assert [zoo_rank(k) for k in ZOO_KINDS] == list(range(9)) and zoo_rank("default") is None


def test_the_rows_a_plan_leaves_out_are_the_ones_the_kinds_declare():
    """--plan's skips, once `kind == "ays" and cls.ays_schedule is None` and `kind.startswith("oss") and real and
    cls.clock_kind != "flow"` in report/plan.py, are each kind's declared `applies`: the same rows on every backbone."""
    from jsbench.backbones import available_backbones, backbone_class
    from jsbench.evaluation.protocol import is_real

    for name in available_backbones():
        cls = backbone_class(name)
        left_out = {k for k in ZOO_KINDS if applies_to(schedule_kind(k), cls) is not None}
        before = {k for k in ZOO_KINDS if (k == "ays" and cls.ays_schedule is None)
                  or (k.startswith("oss") and is_real(cls) and cls.clock_kind != "flow")}
        assert left_out == before, name
    assert {k.name for k in SOURCES if k.applies is not None} == {"ays", "oss", "oss-mean", "oss-image"}


def test_the_hand_made_sources_give_the_sigmas_they_always_gave():
    from jsbench.backbones import load_backbone
    from jsbench.evaluation.evaluate import resolve_schedule
    from jsbench.schedule import shifted_sigmas, uniform_sigmas

    bb = load_backbone("analytic", device="cpu")
    x = bb.initial_noise([1, 2, 3])
    cases = {
        "default": bb.default_sigmas(4, x),
        "ceiling": bb.default_sigmas(bb.ceiling_steps, x),
        "ceiling:30": bb.default_sigmas(30, x),
        "uniform": uniform_sigmas(4, 3, torch.float32, x.device),
        "shift:3": shifted_sigmas(4, 3.0, 3, torch.float32, x.device),
    }
    for spec, expected in cases.items():
        source = resolve_schedule(spec, bb, 4)
        assert torch.equal(source.make(x, None), expected), spec
    assert resolve_schedule("ceiling", bb, 4).budget is None and resolve_schedule("shift:3", bb, 4).label == "shift 3"

"""Real-model defaults: each suite's own evaluation protocol, and what a compare row costs to make.

The embedded worlds (analytic, detail, scenes-dit) are cheap, so `eval` and `compare` evaluate 16 seeds per
prompt there, with the 200-step ceiling (or the backbone's own) and every zoo row. On a real diffusers
model those defaults cost tens of GPU-hours, so there each suite follows its published protocol: the images
per prompt its class declares (`Suite.protocol_seeds`: geneval 4, as GenEval's `generation/*.py` scripts;
hpdv2 1, as hpsv2's benchmark; ocr 4, as MARIO-Eval), the `ceiling` row at the pipeline's own default step
count (labelled "pipeline default"), and the zoo rows that need a many-step teacher or a search on the
training prompts (those whose ScheduleKind declares a `teacher`: `oss`, `searched`, ...) opt-in (`--zoo
karras,oss,searched`); `jsbench compare --plan` shows what each would cost.
"""

from __future__ import annotations

from jsbench import JsbenchError

#: seeds per prompt on the embedded worlds (every committed leaderboard uses these)
EMBEDDED_SEEDS = 16


def is_real(backbone) -> bool:
    """True for a real diffusers model (a backbone or its class): one that does not draw the embedded world."""
    return backbone is not None and not backbone.draws_embedded_world  # None: an unknown name, refused later


def default_seeds(suite_name: str, real: bool) -> int:
    """Images per prompt when --seeds is not given: the suite's protocol on a real model (what its class declares,
    `Suite.protocol_seeds`), else 16."""
    if not real:
        return EMBEDDED_SEEDS
    from jsbench.suites import suite_class

    return suite_class(suite_name).protocol_seeds


def default_zoo(real: bool) -> list[str]:
    """The zoo rows of `compare` when --zoo is not given: every default zoo row, less the teacher-based ones on
    a real model."""
    from jsbench.zoo import DEFAULT_ZOO
    from jsbench.zoo.registry import teacher_kinds  # the rows that declare a teacher trajectory or a schedule search

    return [z for z in DEFAULT_ZOO if not (real and z in teacher_kinds())]


def ceiling_spec(backbone) -> str:
    """The `--schedule` of compare's ceiling row: the backbone's own `ceiling_steps` on an embedded world, the
    pipeline's default step count on a real model."""
    if is_real(backbone) and backbone.default_steps:
        return f"ceiling:{int(backbone.default_steps)}"
    return "ceiling"


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise JsbenchError(f"--limit must be at least 1, got {limit}")


def first_per_task(items: list, limit: int | None) -> list:
    """The first `limit` items of each task, in the suite's order (None: all): the prompts `--limit N`
    evaluates, the same for every row of a compare."""
    check_limit(limit)
    if limit is None:
        return list(items)
    taken: dict[str, int] = {}
    out = []
    for it in items:
        if taken.get(it.task, 0) < limit:
            taken[it.task] = taken.get(it.task, 0) + 1
            out.append(it)
    return out

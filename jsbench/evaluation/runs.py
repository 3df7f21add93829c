"""One evaluation, filed: evaluate a schedule source on a suite, build its records, append them, drop the
side file. The loop behind `jsbench eval` and behind every row of `jsbench compare`.

It lives above evaluate.py and results.py (results imports evaluate's types), and reaches the sharded
evaluation of distributed.py lazily, as distributed.py reaches evaluate.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

from jsbench import JsbenchError
from jsbench.evaluation.evaluate import EVAL_SEED_BASE, EvalRun, ScheduleSource, discard_partial, evaluate, evaluate_sharded
from jsbench.evaluation.results import Record, append_records, make_records
from jsbench.splits import check_split


def validate_eval_options(split: str, suite_name: str, metadata: str | Path | None = None) -> None:
    """The refusals of `jsbench eval`'s options that need no model (it runs them before any weights load): an
    unknown split, and GenEval's evaluation_metadata.jsonl given to another suite."""
    check_split(split)
    if metadata is not None and suite_name != "geneval":
        raise JsbenchError(f"--metadata is GenEval's evaluation_metadata.jsonl; it applies to --suite geneval, not {suite_name!r}")


class EvalResult(NamedTuple):
    run: EvalRun  # per-image scores
    records: list[Record]  # what was appended to `out` (empty on the processes that do not write)


def evaluate_run(backbone, suite, source: ScheduleSource, *, ctx=None, save_images: Path | None = None, **kw) -> EvalRun:
    """`evaluate(backbone, suite, source, **kw)`, its prompts sharded over `ctx`'s processes when given (the
    gathered run; see `jsbench.evaluation.evaluate.evaluate_sharded`), each image also saved as a PNG in GenEval's
    layout under `save_images` (`jsbench.evaluation.images`)."""
    if save_images is not None:
        from jsbench.evaluation.images import ImageSaver

        listed = kw.get("items") if kw.get("items") is not None else suite.items(kw.get("split", "test"))
        seed_base = kw.get("seed_base", EVAL_SEED_BASE)
        kw["save_images"] = ImageSaver(save_images, listed, list(range(seed_base, seed_base + kw["seeds_per_prompt"])), source.spec)
    if ctx is None:
        return evaluate(backbone, suite, source, **kw)
    return evaluate_sharded(backbone, suite, source, ctx, **kw)


def run_eval(
    backbone,
    suite,
    source: ScheduleSource,
    out: Path | None,
    *,
    seeds_per_prompt: int = 16,
    split: str = "test",
    items: list | None = None,
    batch_size: int | None = None,
    progress: bool = True,
    on_images: Callable[[int], None] | None = None,
    reference: EvalRun | None = None,
    filed_under=None,
    ctx=None,
    seed_base: int = EVAL_SEED_BASE,
    save_images: Path | None = None,
    keep_partial: bool = False,
) -> EvalResult:
    """Evaluate `source` with `backbone` on the suite's prompts x seeds and file the run.

    The records carry the paired difference to `reference` (the default schedule's run on the same prompts
    and seeds) when it is given, and are filed under `filed_under`'s name and model (default: `backbone`;
    a distilled sampler's rows sit in the table of the backbone it is compared with). They are appended
    to `out` in one atomic write, and the per-image side file that let an interrupted run resume is then
    removed. With `ctx` (a DistContext), the prompts are sharded over its processes and only the main one
    writes: the others return the gathered run with no records. `save_images`: a folder for the PNGs in
    GenEval's layout (`jsbench.evaluation.images`); `keep_partial`: keep the per-image side file (a compare drops its
    rows' side files once its leaderboard is written, so an interrupted compare resamples nothing)."""
    run = evaluate_run(backbone, suite, source, ctx=ctx, save_images=save_images, seeds_per_prompt=seeds_per_prompt, split=split,
                       progress=progress, out=out, items=items, batch_size=batch_size, on_images=on_images, seed_base=seed_base)
    if ctx is not None and not ctx.is_main:
        return EvalResult(run, [])
    records = make_records(filed_under if filed_under is not None else backbone, suite, source, run, reference=reference)
    if out is not None:
        append_records(out, records)
        if not keep_partial:
            discard_partial(out)
    return EvalResult(run, records)

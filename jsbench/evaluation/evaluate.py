"""Evaluation: a suite's prompts x seeds, one schedule source, batched sampling, per-image scores.

Schedule sources (`--schedule`): one registry, jsbench/zoo/registry.py, declares every kind (`default`,
`ceiling`, `uniform`, `shift:S`, `policy:PATH`, the schedule zoo) with its syntax; `jsbench plugins` lists
them, other packages' included.
Per-image scores of an interrupted run are kept in a side file and skipped on rerun, so an evaluation
killed part-way loses nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from jsbench import JsbenchError
from jsbench.backbones.base import DEFAULT_CEILING_STEPS, eval_batch_size
from jsbench.distributed import DistContext, get_context
from jsbench.io import append_lines, read_prompt_lines
from jsbench.schedule import check_sigmas
from jsbench.zoo.policy import method_label, policy_source  # noqa: F401 (re-exported: callers import them from here)
from jsbench.zoo.registry import ScheduleSource, resolve_source, schedule_kinds, spec_syntax

CEILING_STEPS = DEFAULT_CEILING_STEPS  # the ceiling of a backbone whose `ceiling_steps` is the default (200)
EVAL_SEED_BASE = 0
# how an image's noise seed is derived: a new scheme is a new key for resumed side files and committed scores
NOISE_SCHEME = "prompt-image-sha256"
NOISE_SEED_RANGE = (2**40, 2**62)  # far above training's seeds (1_000_000 + it * B + b): the two never meet


def noise_seed(prompt: str, image: int) -> int:
    """The seed of image `image` (seed base + k) of `prompt`: sha256 of both, mapped into NOISE_SEED_RANGE.
    Every method draws the same x_T for the same (prompt, image), so differences stay paired, and no two
    prompts share a noise, so the noises are not a random effect common to every prompt."""
    digest = hashlib.sha256(json.dumps([NOISE_SCHEME, prompt, int(image)]).encode()).digest()
    lo, hi = NOISE_SEED_RANGE
    return lo + int.from_bytes(digest[:8], "little") % (hi - lo)


class EvalError(JsbenchError):
    pass


def resolve_schedule(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource:
    """A `--schedule` spec as a source of [B, N+1] sigmas, through the one registry of schedule sources
    (jsbench/zoo/registry.py; plugins included). `suite` is needed by the zoo sources computed on a suite's
    training prompts (`oss`, `searched`); `log` reports when such a cache is (re)computed."""
    source = resolve_source(spec, backbone, steps, suite=suite, log=log)
    if source is None:
        raise EvalError(f"unknown schedule {spec!r}: use {spec_syntax(schedule_kinds(errors=[]))}")
    return source


@dataclass
class EvalRun:
    """Per-image scores of one (backbone, suite, schedule, steps) evaluation. `seeds` are the image indices
    (seed base + k; image k of prompt p starts from `noise_seed(p, seed base + k)`). A learned row of several
    training seeds holds each seed's scores in `seed_scores` and their per-image mean in `scores`."""

    items: list
    seeds: list[int]
    scores: list[dict]  # aligned with [(item, seed) for item in items for seed in seeds]
    seed_scores: list[list[dict]] | None = None  # per training seed, aligned like `scores`

    def rows(self):
        return [(it, s) for it in self.items for s in self.seeds]

    @property
    def train_seeds(self) -> int:
        return len(self.seed_scores) if self.seed_scores else 1

    def per_seed(self) -> list[list[dict]]:
        """Each training seed's per-image scores ([scores] for a run of one policy)."""
        return self.seed_scores if self.seed_scores else [self.scores]


def mean_over_seeds(runs: list[EvalRun]) -> EvalRun:
    """One row from the runs of its training seeds on the same prompts and images: per image the mean of
    each metric over the seeds (`scores`), each seed's own scores kept in `seed_scores`."""
    first = runs[0]
    for r in runs[1:]:
        if [it.prompt for it in r.items] != [it.prompt for it in first.items] or r.seeds != first.seeds:
            raise EvalError("the training seeds of a row must be evaluated on the same prompts and images")
    mean = []
    for per_image in zip(*(r.scores for r in runs)):
        keys = [k for k in per_image[0] if all(k in sc for sc in per_image)]
        mean.append({k: sum(sc[k] for sc in per_image) / len(per_image) for k in keys})
    return EvalRun(items=first.items, seeds=first.seeds, scores=mean, seed_scores=[r.scores for r in runs])


def _partial_path(out: Path | None, key: str) -> Path | None:
    if out is None:
        return None
    return out.parent / f".{out.name}.{key}.partial.jsonl"


def evaluate(
    backbone,
    suite,
    source: ScheduleSource,
    seeds_per_prompt: int = 16,
    split: str = "test",
    batch_size: int | None = None,
    progress: bool = True,
    out: Path | None = None,
    seed_base: int = EVAL_SEED_BASE,
    items: list | None = None,
    on_images: Callable[[int], None] | None = None,
    save_images=None,
) -> EvalRun:
    """Per-image scores of `source` on the suite's prompts x seeds. Progress: a bar of its own (per batch,
    with images/s), or, given `on_images`, that callback with each batch's image count (compare's one bar).
    `save_images`: a `jsbench.evaluation.images.ImageSaver` that writes each sampled image and its sigmas."""
    if batch_size is None:
        batch_size = eval_batch_size(backbone)  # memory-aware: the backbone declares how many rows fit
    if batch_size < 1:
        raise EvalError(f"--batch-size must be at least 1, got {batch_size}")
    items = items if items is not None else suite.items(split)
    if not items:
        raise EvalError(f"suite {suite.name} has no {split} prompts")
    if seeds_per_prompt < 1:
        raise EvalError(f"--seeds must be at least 1, got {seeds_per_prompt}")
    seeds = list(range(seed_base, seed_base + seeds_per_prompt))
    rows = [(it, s) for it in items for s in seeds]
    scorer = suite.provenance()  # another detector is another run ({}: the suite declares none)
    from jsbench.backbones import recorded_guidance

    guidance = recorded_guidance(backbone)  # a partial run at another guidance scale is not resumed (None: as before)
    key = hashlib.sha256(json.dumps([backbone.name, backbone.model_id, suite.name, source.spec, source.steps, source.checksum, split, seeds, NOISE_SCHEME,
                                     *([scorer] if scorer else []), *([guidance] if guidance else [])], sort_keys=True).encode()).hexdigest()[:16]
    partial = _partial_path(out, key)
    # a finished score is reused only for the same prompt, seed *and* scoring rules (an edited metadata file)
    digests = {id(it): item_digest(it) for it in items}
    done: dict[tuple[str, int, str], dict] = {}
    if partial is not None and partial.exists():
        for line in partial.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
                done[(rec["prompt"], rec["seed"], rec["item"])] = rec["scores"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # the line the kill cut short is simply redone
    todo = [r for r in rows if (r[0].prompt, r[1], digests[id(r[0])]) not in done]
    from jsbench.progress import image_bar

    with image_bar(f"[bold]eval {suite.name} · {source.label}", len(rows), progress and on_images is None) as bar:
        advance = on_images or bar.advance
        advance(len(rows) - len(todo))  # resumed from the side file
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            cond, x_T = encode_rows(backbone, chunk)
            sigmas = source.make(x_T, cond)
            images = sample_source(backbone, source, x_T, cond, sigmas)
            if save_images is not None:
                save_images.save(chunk, images, sigmas)
            scores = suite.score(images, [it for it, _ in chunk])
            lines = []
            for (it, s), sc in zip(chunk, scores):
                done[(it.prompt, s, digests[id(it)])] = sc
                lines.append(json.dumps({"prompt": it.prompt, "seed": s, "item": digests[id(it)], "scores": sc}) + "\n")
            if partial is not None:
                append_lines(partial, lines)
            advance(len(chunk))
    run = EvalRun(items=items, seeds=seeds, scores=[done[(it.prompt, s, digests[id(it)])] for it, s in rows])
    return run


def encode_rows(backbone, rows: list) -> tuple[object, torch.Tensor]:
    """The encoded prompts and the initial noise of (item, image) rows: what evaluation samples from (image k
    of a prompt from `noise_seed(prompt, k)`)."""
    return backbone.encode([it.prompt for it, _ in rows]), backbone.initial_noise([noise_seed(it.prompt, s) for it, s in rows])


def sample_source(backbone, source: ScheduleSource, x_T: torch.Tensor, cond, sigmas: torch.Tensor | None = None) -> torch.Tensor:
    """One sampler call along the source's schedules for these rows (or `sigmas`, already made by it; checked:
    a zero step never reaches the sampler); the images evaluation scores."""
    sigmas = source.make(x_T, cond) if sigmas is None else sigmas
    check_sigmas(sigmas, free_start=backbone.clock_kind == "flow")
    return backbone.sample(x_T, cond, sigmas)


def item_digest(item) -> str:
    """What an item's score depends on besides the image: its task and metadata (the scoring rules)."""
    return hashlib.sha256(json.dumps([item.task, item.metadata], sort_keys=True, default=str).encode()).hexdigest()[:12]


def read_prompts_file(path: str | Path) -> list[str]:
    """One prompt a line, UTF-8 (a BOM is allowed); a final newline is fine, an empty line is not."""
    prompts: list[str] = []
    first: dict[str, int] = {}
    for lineno, text in read_prompt_lines(path, EvalError):
        line = text.strip()
        if line in first:
            raise EvalError(f"{path}:{lineno}: {line!r} repeats line {first[line]}; each prompt once (--seeds sets the images per prompt)")
        first[line] = lineno
        prompts.append(line)
    return prompts


def items_for_prompts(suite, prompts: list[str], path: str | Path = "prompts") -> list:
    """The suite's items for these prompts, in the file's order; a prompt the suite cannot score is
    refused with its line (the suite's items carry what scoring needs: task and metadata)."""
    known: dict[str, object] = {}
    for split in ("all", "train"):
        for it in suite.items(split):
            known.setdefault(it.prompt, it)
    missing = [(i, p) for i, p in enumerate(prompts, 1) if p not in known]
    if missing:
        lineno, prompt = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise EvalError(
            f"{path}:{lineno}: {prompt!r} is not a prompt of the {suite.name} suite{more}; "
            f"list them with `jsbench prompts --suite {suite.name} --split all`"
        )
    return [known[p] for p in prompts]


def discard_partial(out: Path | None) -> None:
    """Remove the side files once the records they fed are safely written."""
    if out is None:
        return
    for p in out.parent.glob(f".{out.name}.*.partial.jsonl"):
        p.unlink(missing_ok=True)


def evaluate_sharded(backbone, suite, source, ctx: DistContext | None = None, *, seeds_per_prompt: int = 16, split: str = "test",
                     progress: bool = True, out=None, items: list | None = None, **kw):
    """`evaluate` with the prompts dealt round-robin over the processes and the scores gathered.

    Returns the same EvalRun (items, seeds and per-image scores in the suite's order) on every process;
    with one process it is exactly `evaluate(...)`.
    """
    ctx = ctx or get_context()
    if not ctx.distributed:
        return evaluate(backbone, suite, source, seeds_per_prompt, split=split, progress=progress, out=out, items=items, **kw)
    items = items if items is not None else suite.items(split)
    if not items:
        raise EvalError(f"suite {suite.name} has no {split} prompts")
    mine = ctx.shard_indices(len(items))
    local = None
    if mine:
        local = evaluate(backbone, suite, source, seeds_per_prompt, split=split, progress=progress and ctx.is_main,
                         out=out, items=[items[i] for i in mine], **kw)
    parts = ctx.gather_object((mine, local.scores if local else [], local.seeds if local else None))
    seeds = next(s for _, _, s in parts if s is not None)
    per_item: dict[int, list] = {}
    for idx, scores, _ in parts:
        n = len(seeds)
        for j, i in enumerate(idx):
            per_item[i] = scores[j * n : (j + 1) * n]
    scores = [sc for i in range(len(items)) for sc in per_item[i]]
    return EvalRun(items=items, seeds=seeds, scores=scores)

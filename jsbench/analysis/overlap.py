"""The train/test overlap of equivalent GenEval prompts, and what it does to the committed Δs.

A held-out prompt can ask for exactly what a training prompt asks, in other words: "a circle left of a
triangle" is "a triangle right of a circle", "a green circle and a brown square" is "a brown square and
a green circle". The split hashes the prompt text, so such pairs can fall on both sides. The training
prompts are left as they are (the shipped policies were trained on them); this module finds the pairs
(`equivalent_pairs`) and measures, from the committed per-image scores, how every row's Δ vs default
changes when the held-out prompts that have a training twin are left out (`overlap_effect`).
"""

from __future__ import annotations

import re

from jsbench.stats import mean_stderr, overall_of_tasks

_FLIP = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
_POSITION = re.compile(r"(an? .+?) (left of|right of|above|below) (an? .+?)( with .*)?$")
_BOTH = re.compile(r"(an? .+?) and (an? .+?)( with .*)?$")


def requirement(prompt: str) -> tuple:
    """What a prompt asks for, the same for every wording of it: a position as the ordered pair with the
    relation read one fixed way, two objects (with their colours) as an unordered pair, else the text."""
    body = prompt.removeprefix("a photo of ")
    m = _POSITION.match(body)
    if m:
        a, rel, b, tail = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        return ("position", min((a, rel, b), (b, _FLIP[rel], a)), tail)
    m = _BOTH.match(body)
    if m:
        return ("pair", frozenset((m.group(1), m.group(2))), m.group(3) or "")
    return ("text", body)


def equivalent_pairs(train: list[str], test: list[str]) -> list[tuple[str, str]]:
    """(held-out prompt, training prompt) for each held-out prompt a differently worded training prompt
    asks the same of."""
    by_requirement = {requirement(p): p for p in train}
    return [(p, by_requirement[requirement(p)]) for p in test
            if requirement(p) in by_requirement and by_requirement[requirement(p)] != p]


def _overall(entry: dict, keep) -> float:
    """GenEval's overall (mean of the task means) of a scores line over the prompts `keep` accepts."""
    n_seeds = len(entry["seeds"])
    by_task: dict[str, list[float]] = {}
    for i, (prompt, task) in enumerate(zip(entry["prompts"], entry["tasks"])):
        if keep(prompt):
            by_task.setdefault(task, []).extend(entry["scores"][i * n_seeds:(i + 1) * n_seeds])
    return overall_of_tasks(mean_stderr(v) for v in by_task.values())[0]


def overlap_effect(entries: list[dict], overlapping: set[str]) -> list[dict]:
    """For each committed row (a scores line) of a section with a default row: its Δ vs default on every
    held-out prompt and without the `overlapping` ones, and the change."""
    default = {(e["backbone"], e["steps"]): e for e in entries if e["method"] == "default"}
    out = []
    for e in entries:
        ref = default.get((e["backbone"], e["steps"]))
        if ref is None or e is ref or ref["prompts"] != e["prompts"]:
            continue
        everything = _overall(e, lambda p: True) - _overall(ref, lambda p: True)
        without = _overall(e, lambda p: p not in overlapping) - _overall(ref, lambda p: p not in overlapping)
        out.append({"backbone": e["backbone"], "steps": e["steps"], "method": e["method"], "delta": everything,
                    "delta_without_overlap": without, "change": without - everything})
    return out

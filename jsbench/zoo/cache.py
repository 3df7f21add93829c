"""The cache of computed schedules (`oss`, `searched`): JSON files under `<project>/schedules/<backbone>/`
(or $JSBENCH_SCHEDULES), keyed by everything they depend on; and the training prompts they are fitted on."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

import torch

from jsbench.schedule import ScheduleError, check_sigmas
from jsbench.zoo.clock import ZooError

__all__ = ["schedules_dir", "cached_row", "train_items", "spread"]


def schedules_dir() -> Path:
    """Where cached schedules live: $JSBENCH_SCHEDULES, else `<project root>/schedules`."""
    env = os.environ.get("JSBENCH_SCHEDULES")
    if env:
        return Path(env)
    from jsbench.workspace import project_dir

    return project_dir("schedules")


def cache_path(kind: str, backbone, suite_name: str, steps: int) -> Path:
    return schedules_dir() / backbone.name / f"{kind}-{suite_name}-n{steps}.json"


def cached_row(kind: str, backbone, suite_name: str, steps: int, key: dict, compute: Callable[[], tuple[torch.Tensor, dict]], log=None,
               free_start: bool = False) -> torch.Tensor:
    """The cached row when its key matches, else compute, write atomically and return it (`free_start`: the
    row may start below 1, see `schedule.check_sigmas`)."""
    from jsbench.io import write_text_atomic

    path = cache_path(kind, backbone, suite_name, steps)
    if path.is_file():
        try:
            stored = json.loads(path.read_text())
            if stored.get("key") == key:
                row = torch.tensor(stored["sigmas"], dtype=torch.float32)
                check_sigmas(row[None], free_start=free_start)
                if row.numel() == steps + 1:
                    return row
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, ScheduleError):
            pass  # a damaged or stale cache is recomputed
    if log:
        log(f"{kind}: computing the {steps}-step schedule for {backbone.name} on {suite_name} (cached to {path})")
    start = time.perf_counter()
    row, info = compute()
    check_sigmas(row[None], free_start=free_start)
    payload = {"kind": kind, "backbone": backbone.name, "model_id": backbone.model_id, "suite": suite_name, "steps": steps,
               "sigmas": [float(v) for v in row.tolist()], "key": key, "seconds": round(time.perf_counter() - start, 1), **info}
    write_text_atomic(path, json.dumps(payload, indent=1) + "\n")  # creates the folder
    return row


def spread(items: list, count: int) -> list:
    """`count` items evenly spread over the list (all of them when it is shorter), order kept."""
    if count >= len(items):
        return list(items)
    idx = torch.linspace(0, len(items) - 1, count).round().long().tolist()
    return [items[i] for i in dict.fromkeys(idx)]


def train_items(suite, count: int) -> list:
    items = suite.items("train")
    if not items:
        raise ZooError(f"suite {suite.name} has no training prompts to compute a schedule on")
    return spread(items, count)


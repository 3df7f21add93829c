"""Fixed, seedless train/test splits by hashing, the mean with its standard error, and GenEval's overall.

A split never depends on the order or the set of the other prompts it is drawn with: items are put in the
order of a hash of their text and every 4th (positions 1, 5, 9, ...) is held out for test.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Callable, Iterable, TypeVar

from jsbench import JsbenchError

__all__ = ["SPLITS", "SplitError", "check_split", "stable_hash", "sha256_digest", "hashed_order", "held_out_positions", "mean_stderr",
           "overall_of_tasks"]

T = TypeVar("T")
SPLITS = ("train", "test", "all")


class SplitError(JsbenchError, ValueError):
    """An unknown split: one line on the command line (a JsbenchError), still a ValueError to library callers."""


def check_split(split: str) -> None:
    """The one split check of every prompt set, eval's option and `jsbench prompts`."""
    if split not in SPLITS:
        raise SplitError(f"unknown split {split!r}: use test, train or all")


def stable_hash(text: str) -> int:
    """A hash of `text` that is the same in every process (Python's `hash` of a str is salted)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def sha256_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def hashed_order(items: Iterable[T], key: Callable[[T], object] = stable_hash) -> list[T]:
    """`items` sorted by `key` (a stable hash of each item's text)."""
    return sorted(items, key=key)


def held_out_positions(n: int, every: int = 4, first: int = 1) -> list[int]:
    """The positions of a hashed order held out for test: first, first + every, ..."""
    return [i for i in range(n) if i % every == first]


def mean_stderr(values: Any) -> tuple[float, float]:
    """The mean and its standard error (unbiased sample std / sqrt(n)); nan where undefined (n = 0, or n = 1
    for the error).

    `values` is a sequence of numbers (summed in Python floats: the error is sqrt(var / n)), or a torch tensor
    or numpy array, which is reduced by its own library in its own dtype (the error is float(std / sqrt(n)),
    std with Bessel's correction): pass `x.double()` for float64 arithmetic on a float32 tensor. Neither
    torch nor numpy is imported here; an array is recognised by the module of its type.
    """
    library = type(values).__module__.partition(".")[0]
    if library in ("torch", "numpy"):
        n = int(values.numel()) if library == "torch" else int(values.size)
        if n == 0:
            return float("nan"), float("nan")
        mean = float(values.mean())
        if n < 2:
            return mean, float("nan")
        std = values.std(unbiased=True) if library == "torch" else values.std(ddof=1)
        return mean, float(std / math.sqrt(n))
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def overall_of_tasks(task_stats: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """GenEval's overall: the mean of the task means, and its standard error from the per-task standard
    errors (tasks are independent samples): sqrt(sum se_t^2) / T. A task without an error (nan: one image)
    adds none. `task_stats` holds one (mean, stderr) per task, e.g. `mean_stderr` of each task's values;
    (nan, nan) where there are no tasks."""
    stats = list(task_stats)
    if not stats:
        return float("nan"), float("nan")
    value = sum(m for m, _ in stats) / len(stats)
    # `** 2` as the leaderboards have always computed it (x ** 2 and x * x differ in the last bit for ~0.1% of floats)
    se = math.sqrt(sum((s if s == s else 0.0) ** 2 for _, s in stats)) / len(stats)
    return value, se

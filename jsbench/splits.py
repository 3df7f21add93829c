"""Fixed, seedless train/test splits by hashing, and the mean with its standard error.

A split never depends on the order or the set of the other prompts it is drawn with: items are put in the
order of a hash of their text and every 4th (positions 1, 5, 9, ...) is held out for test.
"""

from __future__ import annotations

import hashlib
import math
from typing import Callable, Iterable, Sequence, TypeVar

__all__ = ["SPLITS", "check_split", "stable_hash", "sha256_digest", "hashed_order", "held_out_positions", "mean_stderr"]

T = TypeVar("T")
SPLITS = ("train", "test", "all")


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (train, test or all)")


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


def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    """The mean and its standard error (sample std / sqrt(n)); nan where undefined (n = 0, or n = 1 for the error)."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)

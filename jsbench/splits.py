"""Fixed, seedless train/test splits by hashing.

A split never depends on the order or the set of the other prompts it is drawn with: items are put in the
order of a hash of their text and every 4th (positions 1, 5, 9, ...) is held out for test.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Iterable, TypeVar

from jsbench import JsbenchError

__all__ = ["SPLITS", "SplitError", "check_split", "stable_hash", "sha256_digest", "hashed_order", "held_out_positions"]

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

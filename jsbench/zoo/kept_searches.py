"""The OSS searches a compare keeps (`shared_searches`): `jsbench.zoo.oss.oss_paths` finds a batch's search
here when a section at another step count asked for it before, and adds only the levels it lacks."""

from __future__ import annotations

from contextlib import contextmanager

import torch


def batch_key(cond, x_T: torch.Tensor, teacher: torch.Tensor, free_start: bool, chunk: int | None) -> tuple:
    """What a search's result depends on besides the backbone: the rows' prompts and noise (its bytes), the
    teacher's levels, the start rule and the chunking."""
    return (tuple(cond.prompts), tuple(x_T.shape), str(x_T.dtype), str(x_T.device), bytes_digest(x_T), bytes_digest(teacher), free_start, chunk)


def bytes_digest(t: torch.Tensor) -> str:
    """BLAKE2b of a tensor's bytes: equal only for bit-equal values (`digest` rounds, for schedule rows)."""
    import hashlib

    return hashlib.blake2b(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes(), digest_size=16).hexdigest()


class _SearchMemo:
    """The searches of the last batches (`oss_paths` keeps CPU ones only), within `budget` bytes (oldest dropped first): a
    compare's sections at other step counts ask for the same batches in the same order. An entry holds its
    backbone, so a kept search is found only for that very model."""

    def __init__(self, budget: int = 2**29):
        self.budget = budget
        self.entries: list[tuple] = []  # (backbone, batch_key, jsbench.zoo.oss.OssSearch)

    @property
    def searches(self) -> list:
        return [search for _, _, search in self.entries]

    def find(self, backbone, key: tuple):
        """The kept search of this batch (`batch_key`) on this backbone, or None."""
        # the backbone itself, not its name: the entry holds it, so its id is never another model's
        return next((s for b, k, s in self.entries if b is backbone and k == key), None)

    def keep(self, backbone, key: tuple, search):
        """Keep `search` (again after it grew), dropping the oldest while the kept ones exceed the budget."""
        if not any(s is search for _, _, s in self.entries):
            self.entries.append((backbone, key, search))
        while len(self.entries) > 1 and sum(s.nbytes() for s in self.searches) > self.budget:
            self.entries.pop(0)
        if self.entries[0][2].nbytes() > self.budget:
            self.entries.clear()
        return search


_SEARCHES: _SearchMemo | None = None  # set by `shared_searches`


def active() -> _SearchMemo | None:
    """The memo of the enclosing `shared_searches`, or None outside one."""
    return _SEARCHES


@contextmanager
def shared_searches(budget: int = 2**29):
    """Within it, `oss_paths` keeps its searches (at most `budget` bytes of them, on the CPU) for calls on the
    same batch at other step counts; they are dropped when it ends. Nested uses share the outer one's."""
    global _SEARCHES
    outer = _SEARCHES
    if outer is None:
        _SEARCHES = _SearchMemo(budget)
    try:
        yield _SEARCHES
    finally:
        if outer is None:
            _SEARCHES = None

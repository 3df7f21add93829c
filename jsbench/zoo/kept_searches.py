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
    """The searches of the last batches, on the CPU only and within `budget` bytes (oldest dropped first): a
    compare's sections at other step counts ask for the same batches in the same order. A search holds
    its backbone, so a kept search is found only for that very model."""

    def __init__(self, budget: int = 2**29):
        self.budget = budget
        self.searches: list = []  # of jsbench.zoo.oss.OssSearch

    def find(self, backbone, cond, x_T, teacher, free_start, chunk):
        """The kept search of this batch on this backbone, or None."""
        if x_T.device.type != "cpu":
            return None
        key = batch_key(cond, x_T, teacher, free_start, chunk)
        # the backbone itself, not its name: the entry holds it, so its id is never another model's
        return next((s for s in self.searches if s.backbone is backbone and s.key == key), None)

    def keep(self, search):
        """Keep `search` (a CPU one; again after it grew), dropping the oldest while the kept ones exceed the
        budget."""
        if search.dev.type == "cpu":
            if not any(s is search for s in self.searches):
                self.searches.append(search)
            while len(self.searches) > 1 and sum(s.nbytes() for s in self.searches) > self.budget:
                self.searches.pop(0)
            if self.searches[0].nbytes() > self.budget:
                self.searches.clear()
        return search

    def clear(self) -> None:
        self.searches.clear()


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

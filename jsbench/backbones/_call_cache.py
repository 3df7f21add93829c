"""A bounded cache for the results of deterministic network calls, keyed by everything the call reads.

Why it exists: evaluation samples the same batches (the same prompts, the same noise, the same batch
composition) once for every schedule row it compares, and every row that starts at the same flow time
makes the very same first network call. Computing that call once is exact only if the cached result is
the one the call would return: the key therefore holds the bytes of every input tensor, the state of
every parameter the call reads (a module's identity and each parameter's in-place version counter, so
a fine-tuned or reloaded network never reads a stale entry), the thread count (CPU kernels may sum in
another order on another count) and any scalar setting the call depends on. Nothing is matched
approximately, and nothing is computed for a batch of another composition: a row's result from a
bigger or smaller batch can differ in the last bits (the matrix kernels block by batch size), so only
the whole call is reused.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Callable, Iterable

import torch

__all__ = ["ExactCallCache", "call_key"]


def _update_with_tensor(h, t: torch.Tensor) -> None:
    h.update(repr((str(t.dtype), tuple(t.shape), str(t.device))).encode())
    flat = t.detach().reshape(-1)
    if flat.numel():
        h.update(flat.cpu().contiguous().view(torch.uint8).numpy().tobytes())


def call_key(tensors: Iterable[torch.Tensor | None], modules: Iterable[torch.nn.Module] = (), settings: Any = ()) -> str:
    """A digest of a call's inputs: each tensor's dtype, shape, device and bytes (None counts as a value), each
    module's identity and its parameters' version counters, the thread count, and `repr(settings)`."""
    h = hashlib.blake2b(digest_size=20)
    for t in tensors:
        if t is None:
            h.update(b"<none>")
        else:
            _update_with_tensor(h, t)
    for module in modules:
        # `_version` counts in-place writes (optimizer steps, load_state_dict, `copy_`); `id` a replaced module
        h.update(repr((id(module), tuple(p._version for p in module.parameters()))).encode())
    h.update(repr((torch.get_num_threads(), settings)).encode())
    return h.hexdigest()


def _nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return sum(_nbytes(v) for v in vars(value).values()) if hasattr(value, "__dict__") else 0


class ExactCallCache:
    """key -> result, the least recently used results dropped once their tensors exceed `max_bytes`.

    `get_or_compute(key, compute)` returns the stored result for `key` or stores and returns `compute()`.
    Results are returned as stored, not copied: callers must not modify them in place (the samplers and
    encoders that use it only read them). A result bigger than the whole budget is returned uncached.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def get_or_compute(self, key: str, compute: Callable[[], Any]) -> Any:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]
        self.misses += 1
        value = compute()
        size = _nbytes(value)
        if size > self.max_bytes:
            return value
        self._entries[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped
        return value

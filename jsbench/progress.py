"""Progress bars on stderr: images (or updates) done, their rate, and the time left.

One look for `eval`, `compare` (one bar across all its rows) and `train`; stdout stays free for tables
and for `--format csv|json`, so piped output is exactly parseable.
"""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
from rich.text import Text


class RateColumn(ProgressColumn):
    """Items per second, e.g. '212.4 images/s' (blank until the first batch is done)."""

    def __init__(self, unit: str):
        super().__init__()
        self.unit = unit

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.1f} {self.unit}/s", style="progress.data.speed")


def make_progress(label: str, unit: str = "images", enabled: bool = True, transient: bool = True, status: bool = False) -> Progress:
    columns = [TextColumn(label), BarColumn(bar_width=24), MofNCompleteColumn(), RateColumn(unit), TimeRemainingColumn()]
    if status:
        columns.append(TextColumn("{task.fields[status]}"))
    return Progress(*columns, console=Console(stderr=True), disable=not enabled, transient=transient)


class Bar:
    """A handle on one task of a Progress: `advance(n)` and `status(text)`."""

    def __init__(self, progress: Progress, task):
        self._progress, self._task = progress, task

    def advance(self, n: int) -> None:
        self._progress.update(self._task, advance=n)

    def status(self, text: str) -> None:
        self._progress.update(self._task, status=text)


@contextlib.contextmanager
def image_bar(label: str, total: int, enabled: bool = True, unit: str = "images", transient: bool = True):
    """One bar of `total` items for a block; yields a `Bar`."""
    with make_progress(label, unit, enabled, transient, status=True) as progress:
        yield Bar(progress, progress.add_task(label, total=total, status=""))


class _DropTorchvisionFallback:
    """transformers warns, per image-processor class, that it falls back to its PIL backend because
    torchvision is not installed; jsbench never uses those processors' torchvision path, so the warning
    is noise on every real-backbone command."""

    def filter(self, record) -> bool:
        return "requires torchvision (not installed)" not in record.getMessage()


def quiet_model_loading(show_bars: bool = True) -> None:
    """Drop transformers' torchvision-fallback warnings; with show_bars False (--no-progress) also hide
    diffusers' and transformers' 'Loading pipeline components' / 'Loading weights' bars."""
    import logging

    logger = logging.getLogger("transformers.utils.import_utils")
    if not any(isinstance(f, _DropTorchvisionFallback) for f in logger.filters):
        logger.addFilter(_DropTorchvisionFallback())
    if show_bars:
        return
    import importlib.util

    if importlib.util.find_spec("diffusers") is not None:
        from diffusers.utils import logging as diffusers_logging

        diffusers_logging.disable_progress_bar()
    if importlib.util.find_spec("transformers") is not None:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

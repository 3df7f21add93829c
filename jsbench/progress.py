"""Progress bars on stderr: images (or updates) done, their rate, and the time left.

One look for `eval`, `compare` (one bar across all its rows) and `train`; stdout stays free for tables
and for `--format csv|json`, so piped output is exactly parseable. When stderr is not a terminal (a log
file, CI, SLURM), the bar becomes plain periodic lines with the count, the rate and the time left.
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


LINE_EVERY_S = 10.0  # a plain progress line at most this often (stderr not a terminal)


def _plain(markup: str) -> str:
    from rich.errors import MarkupError

    try:
        return Text.from_markup(markup).plain
    except MarkupError:
        return markup


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class LineProgress:
    """The progress of `make_progress` as plain lines, for a stderr that is not a terminal (a log file, CI,
    SLURM, nohup): "eval geneval · default: 128/1152 images (11%), 42.0 images/s, ETA 0:00:24", after the
    first advance, then at most every `LINE_EVERY_S` seconds, and once when a task completes. It takes
    the calls a rich Progress gets here (add_task, update, the with-block)."""

    def __init__(self, unit: str, stream=None):
        import sys

        self.unit, self.stream = unit, stream if stream is not None else sys.stderr
        self.tasks: list[dict] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, label: str, total: int, completed: int = 0, **fields) -> int:
        import time

        now = time.monotonic()
        self.tasks.append({"label": _plain(label), "total": total, "completed": completed, "start": completed,
                           "t0": now, "shown": None, "final": False, "status": fields.get("status", "")})
        return len(self.tasks) - 1

    def update(self, task: int, advance: int = 0, completed: int | None = None, status: str | None = None, **_) -> None:
        import time

        t = self.tasks[task]
        t["completed"] = completed if completed is not None else t["completed"] + advance
        if status is not None:
            t["status"] = status
        now, done = time.monotonic(), t["completed"] >= t["total"]
        if t["final"] or t["completed"] <= t["start"]:
            return
        if t["shown"] is None or now - t["shown"] >= LINE_EVERY_S or done:
            t["shown"], t["final"] = now, done
            self.stream.write(self.line(t, now) + "\n")
            self.stream.flush()

    def line(self, t: dict, now: float) -> str:
        n, total = t["completed"], t["total"]
        elapsed = max(now - t["t0"], 1e-9)
        rate = (n - t["start"]) / elapsed
        text = f"{t['label']}: {n}/{total} {self.unit} ({100 * n / max(total, 1):.0f}%), {rate:,.1f} {self.unit}/s"
        text += ", done in " + _clock(elapsed) if n >= total else f", ETA {_clock((total - n) / rate) if rate > 0 else '?'}"
        status = _plain(t["status"] or "")
        return text + (f"  {status}" if status else "")


def make_progress(label: str, unit: str = "images", enabled: bool = True, transient: bool = True, status: bool = False):
    """A progress display on stderr: a rich bar on a terminal, plain periodic lines (`LineProgress`)
    otherwise, nothing when not `enabled`."""
    console = Console(stderr=True)
    if enabled and not console.is_terminal:
        return LineProgress(unit)
    columns = [TextColumn(label), BarColumn(bar_width=24), MofNCompleteColumn(), RateColumn(unit), TimeRemainingColumn()]
    if status:
        columns.append(TextColumn("{task.fields[status]}"))
    return Progress(*columns, console=console, disable=not enabled, transient=transient)


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

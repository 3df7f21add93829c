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
    diffusers' and transformers' 'Loading pipeline components' / 'Loading weights' bars.

    A library not imported yet is not imported for this (diffusers alone takes ~2 s, which a run on an
    embedded world never needs): its bars are switched off the moment something imports it."""
    import logging

    logger = logging.getLogger("transformers.utils.import_utils")
    if not any(isinstance(f, _DropTorchvisionFallback) for f in logger.filters):
        logger.addFilter(_DropTorchvisionFallback())
    if show_bars:
        return
    for module in ("diffusers.utils.logging", "transformers.utils.logging"):
        _when_imported(module, lambda logging_module: logging_module.disable_progress_bar())


def _when_imported(name: str, action) -> None:
    """Run `action(module)` on module `name` now if it is imported, else right after its first import."""
    import sys

    if name in sys.modules:
        action(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, action))


class _AfterImport:
    """A one-shot import hook (`sys.meta_path` finder) that runs an action on one module once it has executed.

    It finds the module as the path finder would, and wraps only that module's loader; every other import
    passes through untouched (find_spec returns None), and the hook removes itself at the first match."""

    def __init__(self, name: str, action):
        self.name, self.action = name, action

    def find_spec(self, fullname, path, target=None):
        import importlib.machinery
        import sys

        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None  # not a plain module on the path: let the other finders import it, untouched
        spec.loader = _ActingLoader(spec.loader, self.action)
        return spec


class _ActingLoader:
    """A loader that executes the module with the real loader, then runs the action on it."""

    def __init__(self, loader, action):
        self._loader, self._action = loader, action

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._action(module)

    def __getattr__(self, name):  # get_source, get_filename, is_package, ...: the real loader's
        return getattr(self._loader, name)

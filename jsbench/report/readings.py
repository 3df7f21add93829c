"""`compare`'s side of committed readings (jsbench.rewards.ocr_readings): a suite that declares a reading memo
(`Suite.reading_memo`: ocr) has every image's reading collected per section and written beside the
leaderboard, and a check answered from the committed file with a share read again."""

from __future__ import annotations

from pathlib import Path

from jsbench.rewards.ocr_readings import load_readings, merged, readings_path, section_key, write_readings

__all__ = ["SectionReadings"]


class SectionReadings:
    """One compare's readings. A writing run (`reread` None) collects them per section (`start`, `finish`)
    and writes them (`write`); a check (`reread`: the share read again) is answered from the committed file
    (`summary` says how). A suite with no reading memo makes every call a no-op. `ctx`: the compare's
    DistContext (readings gathered over its processes)."""

    def __init__(self, suite, leaderboard_dir: str | Path, ctx=None, log=print, *, reread: float | None = None):
        declared = suite.reading_memo()
        self.identity, self.memo = declared if declared is not None else (None, None)
        self.path = readings_path(leaderboard_dir, suite.name)
        self.ctx, self.log, self.check = ctx, log, reread is not None
        self.sections: dict[str, dict[bytes, tuple]] = {}
        self.answering = False
        self.close()  # whatever an earlier run in this process left on the (cached) engine's memo
        # read before any image is sampled: a damaged file is refused now, not after the leaderboard is written
        self.committed = load_readings(self.path) if self.active else None
        if self.check:
            self._answer_from_committed(reread)

    def close(self) -> None:
        """The memo as built: no committed readings, no ledger."""
        if self.active:
            self.memo.use_committed({}, 1.0)
            self.memo.ledger = None

    @property
    def active(self) -> bool:
        return self.memo is not None

    def _answer_from_committed(self, reread: float) -> None:
        """Let the memo answer from the committed file, reading `reread` of it again; a file of another
        engine identity (options, versions) is not used, and the log says why."""
        if not self.active:
            return
        committed = self.committed
        if committed is None:
            self.log(f"no committed readings ({self.path.name}): every image is read")
            return
        if committed.identity != self.identity:
            self.log(f"the committed readings ({self.path.name}) were read by {committed.identity}, this engine is "
                     f"{self.identity}: every image is read")
            return
        self.memo.use_committed(committed.all(), reread)
        self.answering = True

    def summary(self) -> str | None:
        """One line: how many readings the committed file answered and how many were read again (all agreed,
        or the check would have stopped), summed over the processes."""
        if not self.answering:
            return None
        counts = self.ctx.gather_object(dict(self.memo.counts)) if self.ctx is not None else [self.memo.counts]
        answered, reread, fresh = (sum(c[k] for c in counts) for k in ("committed", "reread", "fresh"))
        return (f"readings: {answered:,} answered from {self.path.name}, {reread:,} of its images read again, "
                f"every one the same; {fresh:,} images it has no reading of were read")

    def start(self) -> None:
        if self.active and not self.check:
            self.memo.ledger = {}

    def finish(self, backbone: str, model_id: str, steps: int) -> None:
        """File the readings since `start` under the section (backbone, model, steps), from every process."""
        if not self.active or self.check:
            return
        ledger, self.memo.ledger = self.memo.ledger or {}, None
        parts = self.ctx.gather_object(ledger) if self.ctx is not None else [ledger]
        section = self.sections.setdefault(section_key(backbone, model_id, steps), {})
        for part in parts:
            section.update(part)

    def write(self) -> Path | None:
        """This run's sections over the file's others as it is now (main process only; another compare may
        have written a section since this one started)."""
        if not self.active or not self.sections:
            return None
        return write_readings(self.path, merged(load_readings(self.path), self.identity, self.sections))

"""jsbench: learn and benchmark instance-level sampling schedules for frozen text-to-image samplers."""

import os

__version__ = "0.1.0"

# MKL chooses its kernels by CPU (an AMD CPU gets its compatible path, an Intel one AVX-512), so the same
# one-thread run gave different float sums on different machines. Its conditional numerical reproducibility
# mode makes every x86 CPU take the same path: a shipped run repeats bit for bit wherever it is re-run. MKL
# reads this when it first runs, so it holds as long as nothing did a matrix product before jsbench was
# imported; a value set by the user wins.
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")


class JsbenchError(Exception):
    """An error whose message is one line meant for the user (the CLI prints it and exits non-zero)."""

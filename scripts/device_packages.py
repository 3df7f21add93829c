"""What a device script checks before it imports anything heavy: which of its packages cannot be imported.

The GPU machine's image lacks some packages (diffusers: scripts/gpu_wheels.sh fetches them into .whl/), so
scripts/gpu_smoke.py and scripts/gpu_day_one.py name what is missing in one line instead of failing on an
import deep inside a stage. This module imports nothing but the standard library.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec


def missing_packages(names) -> list[str]:
    """The packages of `names` that cannot be imported here (found without importing them)."""
    def absent(name: str) -> bool:
        try:
            return find_spec(name) is None
        except ImportError:  # a finder that refuses the name
            return True

    return [name for name in names if absent(name)]


def exit_if_missing(script: str, names, hint: str) -> None:
    """Exit 2 with one line naming the missing packages of `names`, and `hint` on where they come from."""
    missing = missing_packages(names)
    if missing:
        print(f"{script}: missing packages: {', '.join(missing)} ({hint})", file=sys.stderr)
        sys.exit(2)

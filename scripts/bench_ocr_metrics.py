#!/usr/bin/env python
"""OCR metric speed: `jsbench.scoring.text.edit_distance` (rapidfuzz) against the textbook dynamic programme.

Draws random OCR-like string pairs (lowercase letters, digits and spaces, 0-40 characters, seeded),
checks that both give the same distance on every pair, and times each over the whole set (best of
`--repeats`). Prints one JSON line; `--out` also writes it (atomically).

    python scripts/bench_ocr_metrics.py                 # 5,000 pairs
    python scripts/bench_ocr_metrics.py --pairs 500     # quick
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.io import write_text_atomic  # noqa: E402
from jsbench.scoring.text import edit_distance  # noqa: E402


def textbook_edit_distance(a: str, b: str) -> int:
    """Levenshtein by the two-row Wagner-Fischer programme in pure Python (the former implementation)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def random_pairs(n: int, seed: int, max_len: int = 40) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789 "

    def word() -> str:
        return "".join(rng.choice(letters) for _ in range(rng.randint(0, max_len)))

    return [(word(), word()) for _ in range(n)]


def best_time(fn, pairs, repeats: int) -> tuple[float, list[int]]:
    best, out = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        out = [fn(a, b) for a, b in pairs]
        best = min(best, time.perf_counter() - start)
    return best, out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.repeats < 1:
        parser.error("--pairs and --repeats must be >= 1")
    pairs = random_pairs(args.pairs, args.seed)
    t_ref, ref = best_time(textbook_edit_distance, pairs, args.repeats)
    t_lib, lib = best_time(edit_distance, pairs, args.repeats)
    mismatches = sum(x != y for x, y in zip(ref, lib))
    result = {
        "pairs": args.pairs,
        "seed": args.seed,
        "mismatches": mismatches,
        "textbook_s": round(t_ref, 6),
        "rapidfuzz_s": round(t_lib, 6),
        "speedup": round(t_ref / t_lib, 1),
        "python": platform.python_version(),
    }
    line = json.dumps(result)
    print(line)
    if args.out is not None:
        write_text_atomic(args.out, line + "\n")
    if mismatches:
        print(f"error: {mismatches} pairs differ between rapidfuzz and the textbook programme", file=sys.stderr)
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""The README's main command (`jsbench compare`) timed in this checkout and in an older commit, alternately.

Each side runs it as a new user would, with its own policies and defaults, writing into a scratch folder;
wall and CPU seconds and the images evaluated (see jsbench/analysis/throughput.py, `measure_main`).

    python scripts/bench_main_command.py --base b7ec92e --repeats 2     # --write: bench/results/main_command.json
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.analysis.costs import machine  # noqa: E402
from jsbench.analysis.throughput import measure_main, sides_against  # noqa: E402
from jsbench.io import add_result_options, write_result  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the older commit to compare with (one whose policies this one's "
                                                      "rows match, for a ratio of the same work)")
    ap.add_argument("--repeats", type=int, default=2, help="alternating repeats per side (the order flips each time)")
    add_result_options(ap, "bench/results/main_command.json")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jsbench-base-") as tmp:
        try:
            sides = sides_against(args.base, ROOT, Path(tmp), ("jsbench", "policies"))
        except (ValueError, subprocess.CalledProcessError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        new_label = sides[0].label
        print(f"timing the main command: {new_label} vs {args.base}, {args.repeats} alternating repeats", flush=True)
        result = measure_main(sides, args.repeats, log=lambda s: print(s, flush=True))
    for label in (new_label, args.base):
        r = result[label]
        print(f"{label:>14s}: {r['wall_seconds']['median']:.1f} s wall, {r['cpu_seconds']['median']:.1f} s CPU (medians), "
              f"images {', '.join(map(str, r['images']))}")
    sp = result["speedup"]
    print(f"speed-up: wall {sp['wall']['median']:.2f}x ({sp['wall']['min']:.2f}-{sp['wall']['max']:.2f}), "
          f"CPU {sp['cpu']['median']:.2f}x ({sp['cpu']['min']:.2f}-{sp['cpu']['max']:.2f})")
    payload = {"new": new_label, "base": args.base, "repeats": args.repeats, "machine": machine(),
               "seconds": round(time.perf_counter() - start, 1), "main_command": result}
    write_result(payload, write=args.write, out=args.out, committed=ROOT / "bench/results/main_command.json", root=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Training updates/s and evaluation images/s of the embedded worlds, against an older commit in one run.

Every workload runs from this checkout and from a snapshot of `--base`, alternately, one thread each, at
the shipped settings (see jsbench/analysis/throughput.py for what is timed and how the ratio is formed).

    python scripts/bench_throughput.py                         # against 9c82c2a, 3 repeats (--write: bench/results/throughput.json)
    python scripts/bench_throughput.py --worlds detail --repeats 1 --no-eval     # quick
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
from jsbench.io import add_result_options, write_result  # noqa: E402
from jsbench.analysis.throughput import WORLDS, measure, sides_against, table  # noqa: E402

# the commit issue 42 measured its baseline on: the last before the speed work
BASE = "9c82c2a"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=BASE, help=f"the older commit to compare with (default {BASE})")
    ap.add_argument("--worlds", nargs="+", choices=sorted(WORLDS), default=list(WORLDS))
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats per side (the order flips each time)")
    ap.add_argument("--no-train", dest="train", action="store_false", help="time evaluation only")
    ap.add_argument("--no-eval", dest="evaluate", action="store_false", help="time training only")
    add_result_options(ap, "bench/results/throughput.json")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    if not (args.train or args.evaluate):
        ap.error("--no-train and --no-eval leave nothing to time")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jsbench-base-") as tmp:
        try:
            sides = sides_against(args.base, ROOT, Path(tmp), ("jsbench",))
        except (ValueError, subprocess.CalledProcessError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        new_label = sides[0].label
        print(f"timing {', '.join(args.worlds)}: {new_label} vs {args.base}, {args.repeats} alternating repeats",
              flush=True)
        result = measure([WORLDS[w] for w in args.worlds], sides, args.repeats, train=args.train,
                         evaluate=args.evaluate, log=lambda s: print(s, flush=True))
    print()
    for line in table(result, new_label, args.base):
        print(line)
    payload = {"new": new_label, "base": args.base, "repeats": args.repeats, "machine": machine(),
               "seconds": round(time.perf_counter() - start, 1), "worlds": result}
    write_result(payload, write=args.write, out=args.out, committed=ROOT / "bench/results/throughput.json", root=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

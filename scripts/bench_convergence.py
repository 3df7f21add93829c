#!/usr/bin/env python
"""Convergence rule on simulated held-out curves: how often it flags a flat run, and a still-moving one.

Curves of 21 points over 64 held-out binary images (the same images at every point), wandering as an AR(1)
(SD 0.01-0.03, phi 0-0.6), flat, still rising by 0.05-0.15 or falling by 0.1 per quarter of training;
rows of 8 seeds averaged point by point, flat, rising by 0.03-0.05 or falling by 0.05. The rule and the simulator are jsbench.policy.convergence.

    python scripts/bench_convergence.py                 # print the rates (about a minute at 1000 trials)
    python scripts/bench_convergence.py --write         # -> bench/results/convergence.json
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "convergence.json"
sys.path.insert(0, str(ROOT))

from jsbench.policy.convergence import LEVEL, MARGIN, RULE, ROW_RULE, flag_rates  # noqa: E402
from jsbench.io import add_result_options, write_result  # noqa: E402

FLAT_TARGET, RISING_TARGET = 0.10, 0.90  # issue 36: flag a flat run <= 10 % of the time, a rising one >= 90 %


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000, help="simulated runs per setting (rows: a quarter as many)")
    ap.add_argument("--seed", type=int, default=0)
    add_result_options(ap, str(COMMITTED.relative_to(ROOT)))
    args = ap.parse_args(argv)
    start = time.perf_counter()
    res = flag_rates(seed=args.seed, trials=args.trials)
    print(f"margin {MARGIN} per quarter of training, level {LEVEL} each way (rising, falling); flagged = judged NOT converged")
    print(f"{'':6}{'wander SD':>10}{'phi':>6}{'rise/quarter':>14}{'flagged':>9}")
    for kind, rows in (("run", res["runs"]), (f"row×{res['rows'][0]['seeds']}", res["rows"])):
        for r in rows:
            print(f"{kind:6}{r['wander_sd']:>10.2f}{r['phi']:>6.1f}{r['rise']:>14.2f}{r['flagged']:>9.3f}")
    flat = max(r["flagged"] for r in res["runs"] + res["rows"] if r["rise"] == 0)
    # the smallest simulated rise flagged >= 90 % of the time, per (wander, phi): runs and rows
    detect = {}
    for kind in ("runs", "rows"):
        for r in res[kind]:
            key = f"{kind} sd={r['wander_sd']} phi={r['phi']}"
            if r["rise"] > 0 and r["flagged"] >= RISING_TARGET and (key not in detect or r["rise"] < detect[key]):
                detect[key] = r["rise"]
    print(f"\nflat curves flagged at most {flat:.3f} of the time (target <= {FLAT_TARGET})")
    print("smallest simulated rise per quarter flagged >= 90 %: " + "; ".join(f"{k}: {v}" for k, v in detect.items()))
    record = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
              "command": "python scripts/bench_convergence.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "seconds": round(time.perf_counter() - start, 1), "rule": RULE, "row_rule": ROW_RULE,
              "flat_target": FLAT_TARGET, "rising_target": RISING_TARGET, "flat_flagged_max": flat,
              "smallest_rise_detected": detect, **res}
    write_result(record, write=args.write, out=args.out, committed=COMMITTED, root=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

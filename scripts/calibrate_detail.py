#!/usr/bin/env python
"""The detail world's calibration table at N = 3: default, uniform, searched global, searched per prompt,
searched per instance (prompt x the texture mode the noise picks) and the many-step ceiling, on the
held-out prompts; schedules are chosen on search seeds and reported on fresh seeds.

    OMP_NUM_THREADS=1 python scripts/calibrate_detail.py --write         # replaces bench/results/calibration-detail.json
    python scripts/calibrate_detail.py --search-seeds 4 --report-seeds 4 --points 8 --ceiling-steps 20   # quick, prints only

Nothing is written without --write or --out PATH. About 15 minutes on the 2-core machine at the defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from jsbench.backbones import load_backbone
from jsbench.io import add_result_options, write_result
from jsbench.suites import load_suite
from jsbench.world.detail_calibration import calibrate_detail, candidate_grid

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "calibration-detail.json"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--search-seeds", type=int, default=12, help="noises per prompt to choose schedules on (each row its own seed)")
    ap.add_argument("--report-seeds", type=int, default=12, help="fresh noises per prompt to report on")
    ap.add_argument("--points", type=int, default=10, help="log-spaced grid points in [--low, --high]; candidates are all pairs")
    ap.add_argument("--low", type=float, default=0.008)
    ap.add_argument("--high", type=float, default=0.8)
    ap.add_argument("--ceiling-steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    add_result_options(ap, str(COMMITTED.relative_to(ROOT)))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    backbone = load_backbone("detail")
    suite = load_suite("geneval", backbone)  # scores as evaluation does: the detail world's detector, GenEval's rules
    cands = candidate_grid(args.points, args.low, args.high)
    cal = calibrate_detail(backbone, suite, suite.items("test"), args.search_seeds, args.report_seeds, cands, args.ceiling_steps, log=lambda m: print(m, flush=True))
    print(f"\ndetail world, N = {cal.steps}: {cal.n_prompts} held-out prompts ({cal.n_open_prompts} open: 'with stripes' / "
          f"'with mixed stripes'), {cal.report_seeds} report seeds each (search: {cal.search_seeds} other seeds, {cal.candidates} candidates)")
    print(f"{'schedule':<28}{'all prompts':>18}{'open prompts':>18}{'named texture':>18}")
    for name, row in cal.rows.items():
        print(f"{name:<28}" + "".join(f"{row[k][0]:>10.3f} ± {row[k][1]:.3f}" if k in row else f"{'-':>18}" for k in ("all", "open", "closed")))
    print("paired over prompts:")
    for name, row in cal.gains.items():
        print(f"  {name:<48}" + "".join(f"{k}: {v[0]:+.3f} ± {v[1]:.3f}   " for k, v in row.items()))
    print(f"searched global schedule: {cal.global_schedule}")
    payload = {"command": "python scripts/calibrate_detail.py " + " ".join(argv if argv is not None else sys.argv[1:]),
               "seconds": round(time.perf_counter() - start, 1), **cal.to_dict()}
    print(f"took {payload['seconds']:.0f} s")
    write_result(payload, write=args.write, out=args.out, committed=COMMITTED, root=ROOT, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

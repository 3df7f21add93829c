#!/usr/bin/env python
"""SE calibration: repeat the detail and analytic comparisons over replicate seed bases.

For every paired difference of two rows (default and the learned rows under policies/, paired on the
same images like the leaderboard's Δ), the spread of the difference over replicates, the mean SE the
leaderboard reports for it, and their ratio (target <= 1.3). The logic is jsbench.se_calibration.

    python scripts/bench_se_calibration.py                        # detail 3 steps + analytic 3 steps, 8 x 8 seeds
    python scripts/bench_se_calibration.py --write                # -> bench/results/se_calibration.json
    python scripts/bench_se_calibration.py --run analytic:3 --seeds 2 --replicates 2     # quick
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "se_calibration.json"
sys.path.insert(0, str(ROOT))

from jsbench.io import add_result_options, write_result  # noqa: E402
from jsbench.se_calibration import SCHEMA, TARGET_RATIO, se_calibration  # noqa: E402


def parse_run(text: str) -> tuple[str, int]:
    backbone, _, steps = text.partition(":")
    if not backbone or not steps.isdigit() or int(steps) < 1:
        raise argparse.ArgumentTypeError(f"--run takes BACKBONE:STEPS, e.g. detail:3, not {text!r}")
    return backbone, int(steps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=parse_run, action="append", default=None, help="BACKBONE:STEPS (repeat; default detail:3 and analytic:3)")
    ap.add_argument("--seeds", type=int, default=8, help="images per prompt in each replicate")
    ap.add_argument("--replicates", type=int, default=8, help="seed bases 0, n, 2n, ... (at least 2)")
    ap.add_argument("--policies", type=Path, default=ROOT / "policies", help="folder of the learned rows, <backbone>/<row>/seed<S>/")
    ap.add_argument("--threads", type=int, default=1)
    add_result_options(ap, str(COMMITTED.relative_to(ROOT)))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from jsbench.backbones import load_backbone
    from jsbench.suites import load_suite

    start = time.perf_counter()
    results = []
    for backbone_name, steps in args.run or [("detail", 3), ("analytic", 3)]:
        bb = load_backbone(backbone_name)
        suite = load_suite("geneval", bb)
        res = se_calibration(bb, suite, steps, args.policies, seeds=args.seeds, replicates=args.replicates, log=print)
        results.append(res)
        print(f"\n{backbone_name} · {steps} steps · {res['prompts']} prompts × {args.seeds} images × {args.replicates} replicates")
        print(f"{'difference':<40}{'mean Δ':>9}{'spread':>9}{'mean SE':>9}{'ratio':>7}")
        for d in res["differences"]:
            name = f"{d['a']} − {d['b']}"
            print(f"{name[:39]:<40}{d['mean_delta']:>+9.3f}{d['spread']:>9.4f}{d['mean_se']:>9.4f}{d['ratio']:>7.2f}{'' if d['ok'] else '  > target'}")
        print(f"pooled over the differences: {res['pooled_ratio']:.2f} (one ratio is uncertain by about {res['ratio_relative_error']:.0%})")
    print(f"\nspread: SD of Δ over replicates; mean SE: the leaderboard's SE of Δ; target ratio <= {TARGET_RATIO}")
    record = {
        "schema": SCHEMA, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "torch": torch.__version__,
        "threads": args.threads, "command": "python scripts/bench_se_calibration.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seconds": time.perf_counter() - start, "target_ratio": TARGET_RATIO,
        "all_ok": all(r["all_ok"] for r in results), "runs": results,
    }
    write_result(record, write=args.write, out=args.out, committed=COMMITTED, root=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

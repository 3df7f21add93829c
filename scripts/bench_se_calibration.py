#!/usr/bin/env python
"""SE calibration: the image part and the seed part of jsbench's SEs, each against the spread it claims.

Image part: for every paired difference of two rows (default and the learned rows under policies/, paired
on the same images like the leaderboard's Δ), the spread of the difference over replicate image sets, the
image part of the SE the leaderboard reports for it, and their ratio (target <= 1.3).
Seed part (key `seed_term`): two rows trained with many seeds (default analytic 3-step rloo and global, 24
seeds: policies/ holds the first ones, the rest are trained into --seed-runs with the shipped rows' own
settings), their per-seed differences in disjoint groups, the spread of the group Δ against the seed part
of the SE a row of that many seeds prints, with the ratio's F interval. The logic is jsbench.analysis.se_calibration.

    python scripts/bench_se_calibration.py                        # both parts, as committed
    python scripts/bench_se_calibration.py --write                # -> bench/results/se_calibration.json
    python scripts/bench_se_calibration.py --part image --run analytic:3 --seeds 2 --replicates 2     # quick
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "se_calibration.json"
sys.path.insert(0, str(ROOT))

from jsbench.io import add_result_options, write_result  # noqa: E402
from jsbench.analysis.se_calibration import SCHEMA, TARGET_RATIO, se_calibration, seed_term_calibration  # noqa: E402


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
    ap.add_argument("--part", choices=("both", "image", "seed"), default="both", help="which calibration(s) to run")
    ap.add_argument("--seed-term", default="analytic:3:rloo-n3:global-n3", help="BACKBONE:STEPS:ROW_A:ROW_B of the seed-term calibration")
    ap.add_argument("--train-seeds", type=int, default=24, help="training seeds of each seed-term row")
    ap.add_argument("--group-size", type=int, default=3, help="seeds per disjoint group (the S of the rows being calibrated)")
    ap.add_argument("--seed-runs", type=Path, default=ROOT / "runs" / "seed-term", help="where seeds beyond policies/ are trained")
    add_result_options(ap, str(COMMITTED.relative_to(ROOT)))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from jsbench.backbones import load_backbone
    from jsbench.suites import load_suite

    start = time.perf_counter()
    results = []
    for backbone_name, steps in (args.run or [("detail", 3), ("analytic", 3)]) if args.part != "seed" else []:
        bb = load_backbone(backbone_name)
        suite = load_suite("geneval", bb)
        res = se_calibration(bb, suite, steps, args.policies, seeds=args.seeds, replicates=args.replicates, log=print)
        results.append(res)
        print(f"\n{backbone_name} · {steps} steps · {res['prompts']} prompts × {args.seeds} images × {args.replicates} replicates")
        print(f"{'difference':<34}{'mean Δ':>8}{'spread':>8}{'image SE':>9}{'ratio':>6}  95% interval")
        for d in res["differences"]:
            name = f"{d['a']} − {d['b']}"
            lo, hi = d["ratio_ci"]
            print(f"{name[:33]:<34}{d['mean_delta']:>+8.3f}{d['spread']:>8.4f}{d['mean_image_se']:>9.4f}{d['ratio']:>6.2f}  {lo:.2f}–{hi:.2f}"
                  f"{'' if d['ok'] else '  > target'}")
        print(f"pooled over the differences: {res['pooled_ratio']:.2f} (one ratio is uncertain by about {res['ratio_relative_error']:.0%})")
    if results:
        print(f"\nspread: SD of Δ over replicates; image SE: the image part of the leaderboard's SE of Δ; target ratio <= {TARGET_RATIO}")
    seed_term = run_seed_term(args) if args.part != "image" else None
    record = {
        "schema": SCHEMA, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "torch": torch.__version__,
        "threads": args.threads, "command": "python scripts/bench_se_calibration.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seconds": time.perf_counter() - start, "target_ratio": TARGET_RATIO,
        "all_ok": all(r["all_ok"] for r in results), "runs": results,
    }
    if seed_term is not None:
        record["seed_term"] = seed_term
    write_result(record, write=args.write, out=args.out, committed=COMMITTED, root=ROOT)
    return 0


def seed_folders(args, row: str, backbone: str) -> list[Path]:
    """The row's first --train-seeds seed folders: policies/ first, then --seed-runs, training the missing
    ones there with the shipped row's own settings (its seed0 manifest's config, another seed)."""
    from dataclasses import asdict, replace

    from jsbench.policy.schedule_policy import read_manifest
    from jsbench.train.reinforce import TrainConfig, Trainer

    shipped = args.policies / backbone / row
    if not (shipped / "seed0" / "manifest.json").is_file():
        raise SystemExit(f"error: {shipped}/seed0 holds no policy: the seed-term rows must be shipped rows")
    config = TrainConfig(**read_manifest(shipped / "seed0")["train"])
    folders = []
    for s in range(args.train_seeds):
        folder = shipped / f"seed{s}"
        if not (folder / "manifest.json").is_file():
            folder = args.seed_runs / backbone / row / f"seed{s}"
            want = json.loads(json.dumps(asdict(replace(config, seed=s))))  # as a manifest holds it
            done = (folder / "manifest.json").is_file()
            if done and read_manifest(folder)["train"] != want:
                # a run of other settings (the shipped rows were retrained since): its seed would not be this row's
                print(f"  {folder} was trained with other settings than {shipped}/seed0 (now {config.iters} updates): "
                      "training it again", flush=True)
                shutil.rmtree(folder)  # a fresh run keeps a folder's held-out point 0: start from an empty one
                done = False
            if not done:
                print(f"  training {row} seed {s} -> {folder}", flush=True)
                trainer = Trainer(replace(config, seed=s), folder)
                trainer.train(progress=False)
                trainer.save_policy()
                (folder / "checkpoint.pt").unlink(missing_ok=True)
        folders.append(folder)
    return folders


def run_seed_term(args) -> dict:
    from jsbench.backbones import load_backbone
    from jsbench.suites import load_suite

    try:
        backbone_name, steps, row_a, row_b = args.seed_term.split(":")
        steps = int(steps)
    except ValueError:
        raise SystemExit(f"error: --seed-term takes BACKBONE:STEPS:ROW_A:ROW_B, e.g. analytic:3:rloo-n3:global-n3, not {args.seed_term!r}")
    bb = load_backbone(backbone_name)
    suite = load_suite("geneval", bb)
    a, b = seed_folders(args, row_a, backbone_name), seed_folders(args, row_b, backbone_name)
    res = seed_term_calibration(bb, suite, steps, a, b, group_size=args.group_size, seeds=args.seeds, log=print)
    lo, hi = res["ratio_ci"]
    print(f"\nseed term · {backbone_name} · {steps} steps · {row_a} − {row_b}: {res['seeds']} seeds in {res['groups']} groups of {res['group_size']}")
    print(f"  group Δ spread {res['spread']:.4f}, printed seed part (RMS) {res['rms_seed_se']:.4f}, ratio {res['ratio']:.2f} "
          f"(95% {res['ratio_ci_rule']} interval {lo:.2f}–{hi:.2f}{', covers 1' if res['covers_1'] else ', misses 1'})")
    return res


if __name__ == "__main__":
    sys.exit(main())

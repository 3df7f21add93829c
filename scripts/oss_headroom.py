#!/usr/bin/env python
"""Per world and budget: the instance headroom oss-image - oss, the learned policy's gain over the global
schedule, and the share of the headroom it recovers (`jsbench.analysis.instance_headroom`), from the committed
per-image scores.

    python scripts/oss_headroom.py [--scores leaderboards/geneval.scores.jsonl] [--instance js]
                                   [--global global|searched] [--bootstrap 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jsbench import JsbenchError
from jsbench.analysis.instance_headroom import headroom_sections, instance_headroom, leaderboard_gain

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scores", type=Path, default=ROOT / "leaderboards" / "geneval.scores.jsonl")
    ap.add_argument("--instance", default="js", help="the learned instance row (default js)")
    ap.add_argument("--global", dest="global_row", default="global", help="the global row: global or searched")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--json", action="store_true", help="print JSON, one object per section")
    args = ap.parse_args()
    try:
        sections = headroom_sections(args.scores)
        if not sections:
            raise JsbenchError(f"{args.scores}: no section has both an oss and an oss-image row; regenerate with jsbench compare")
        # the gain's SE counts training seeds: the leaderboard CSV beside the scores file holds it
        name = args.scores.name
        board = args.scores.with_name(name[: -len(".scores.jsonl")] + ".csv") if name.endswith(".scores.jsonl") else None
        results = []
        for b, n in sections:
            se, df = (leaderboard_gain(board, b, n, args.instance, args.global_row) if board else None) or (None, None)
            results.append(instance_headroom(args.scores, b, n, args.instance, args.global_row, args.bootstrap, gain_se=se, gain_df=df))
    except JsbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        for r in results:
            print(json.dumps(r))
        return 0
    print(f"| world | steps | headroom oss-image − oss | {args.instance} − {args.global_row} | share recovered (95% CI) |")
    print("|---|---|---|---|---|")
    for r in results:
        h, g, s = r["headroom"], r["gain"], r["share"]
        share = f"{s['value']:.2f} ({s['ci95'][0]:.2f} to {s['ci95'][1]:.2f})" if s else "– (no headroom > 0)"
        print(f"| {r['backbone']} | {r['steps']} | {h['value']:+.3f} ± {h['se']:.3f} | {g['value']:+.3f} ± {g['se']:.3f} | {share} |")
    floored = [r["gain_se_floor"] is not None for r in results]
    pair = f"{args.instance} − {args.global_row}"
    # t where the leaderboard gives the SE's df (a CSV written before its df columns: the normal)
    t_note = " (t at its df)" if any(r["gain_df"] is not None for r in results) else ""
    if all(floored):
        gain_note = f"{pair}: at least the leaderboard's SE, which counts training seeds{t_note}"
    elif any(floored):
        gain_note = (f"{pair}: at least the leaderboard's SE, which counts training seeds{t_note}, for "
                     + ", ".join(f"{r['backbone']} {r['steps']}" for r, f in zip(results, floored) if f) + "; prompts only elsewhere")
    else:
        gain_note = f"{pair}: prompts only (no leaderboard SE that counts training seeds for this pair)"
    print(f"± : bootstrap SE over prompts resampled within tasks ({results[0]['bootstrap']} draws, seed 0); {gain_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The held-out prompts that a training prompt asks the same of (objects swapped), per world, and how the
committed Δ vs default of every leaderboard row moves without them (jsbench/analysis/overlap.py).

    python scripts/split_overlap.py [--write | --out PATH]
"""

import argparse
import json
from pathlib import Path

from jsbench.backbones import listing_backbone, load_backbone
from jsbench.io import add_result_options, write_result
from jsbench.analysis.overlap import equivalent_pairs, overlap_effect, requirement
from jsbench.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_result_options(parser, "bench/results/split_overlap.json")
    args = parser.parse_args()
    entries = [json.loads(line) for line in (ROOT / "leaderboards" / "geneval.scores.jsonl").read_text().splitlines()]
    worlds, effects = {}, []
    for name in sorted({e["backbone"] for e in entries}):
        suite = load_suite("geneval", listing_backbone(name) or load_backbone(name))
        train, test = [it.prompt for it in suite.items("train")], [it.prompt for it in suite.items("test")]
        pairs = equivalent_pairs(train, test)
        worlds[name] = {"train": len(train), "test": len(test), "pairs": pairs}
        print(f"{name}: {len(pairs)} of {len(test)} held-out prompts have a training twin")
        for held_out, twin in pairs:
            print(f"  {held_out!r}  ~  {twin!r}")
        mine = [e for e in entries if e["backbone"] == name]
        # the two objects in the other order (GenEval's rules_key: tests/test_world.py's known-leak xfail), or
        # a position read from the other object (the mirror relation)
        swapped = {p for p, _ in pairs if requirement(p)[0] == "pair"}
        for r, only_swapped in zip(overlap_effect(mine, {p for p, _ in pairs}), overlap_effect(mine, swapped)):
            r["change_without_swapped_only"] = only_swapped["change"]
            effects.append(r)
        worlds[name]["swapped"] = sorted(swapped)
    for r in effects:
        print(f"{r['backbone']:<11} n{r['steps']:<4} {r['method']:<34} Δ {r['delta']:+.4f} -> {r['delta_without_overlap']:+.4f}"
              f"  ({r['change']:+.4f})")
    for key, what in (("change", "all twins"), ("change_without_swapped_only", "swapped objects only")):
        largest = max(effects, key=lambda r: abs(r[key]))
        print(f"largest change of a Δ without {what}: {largest[key]:+.4f} ({largest['backbone']} n{largest['steps']} {largest['method']})")
    write_result({"worlds": worlds, "rows": effects}, write=args.write, out=args.out,
                 committed=ROOT / "bench" / "results" / "split_overlap.json", root=ROOT)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""The README's result tables, made from the committed leaderboards, so they cannot drift from them.

Each table sits in the README between `<!-- table:NAME -->` and `<!-- /table:NAME -->`; NAME is a world
(`analytic`, `scenes-dit`, `detail`: leaderboards/geneval.csv; `ocr`: leaderboards/ocr.csv) or
`headline` (every section's headline contrasts: leaderboards/*.contrasts.csv). The logic is
jsbench.readme_tables.

    python scripts/readme_tables.py            # print every table
    python scripts/readme_tables.py --write    # rewrite the README's blocks
    python scripts/readme_tables.py --check    # exit 1 if a README block differs from its table
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.readme_tables import fill_blocks, readme_tables  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite the README's table blocks")
    group.add_argument("--check", action="store_true", help="exit 1 if a block differs from its table")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--leaderboards", type=Path, default=ROOT / "leaderboards")
    args = ap.parse_args(argv)
    tables = readme_tables(args.leaderboards)
    if not (args.write or args.check):
        for name, text in tables.items():
            print(f"<!-- table:{name} -->\n{text}<!-- /table:{name} -->\n")
        return 0
    old = args.readme.read_text()
    new = fill_blocks(old, tables)
    if args.check:
        if new != old:
            print(f"{args.readme}: its result tables differ from the leaderboards; run python scripts/readme_tables.py --write")
            return 1
        print(f"{args.readme}: every result table matches the leaderboards")
        return 0
    if new != old:
        from jsbench.io import write_text_atomic

        write_text_atomic(args.readme, new)
    print(f"wrote {args.readme}" if new != old else f"{args.readme}: unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())

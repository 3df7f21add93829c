#!/usr/bin/env python
"""The result tables of README.md and docs/*.md, made from the committed leaderboards, so they cannot drift.

Each table sits in a page between `<!-- table:NAME -->` and `<!-- /table:NAME -->`, each NAME in one place
across README.md and every docs/*.md page; NAME is a world (`analytic`, `scenes-dit`, `detail`:
leaderboards/geneval.csv; `ocr`: leaderboards/ocr.csv; their blocks are in docs/results.md) or `headline`
(every section's headline contrasts: leaderboards/*.contrasts.csv; its block is in README.md). The logic
is jsbench.report.readme_tables.

    python scripts/readme_tables.py            # print every table
    python scripts/readme_tables.py --write    # rewrite the pages' blocks
    python scripts/readme_tables.py --check    # exit 1 if a block differs from its table, or is placed twice or nowhere
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.report.readme_tables import block_names, block_problems, fill_pages, readme_tables, table_pages  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite the table blocks of README.md and docs/*.md")
    group.add_argument("--check", action="store_true", help="exit 1 if a block differs from its table")
    ap.add_argument("--root", type=Path, default=ROOT, help="the project whose README.md and docs/*.md hold the blocks")
    ap.add_argument("--leaderboards", type=Path, default=None, help="default: ROOT/leaderboards")
    args = ap.parse_args(argv)
    tables = readme_tables(args.leaderboards or args.root / "leaderboards")
    if not (args.write or args.check):
        for name, text in tables.items():
            print(f"<!-- table:{name} -->\n{text}<!-- /table:{name} -->\n")
        return 0
    old = {path: path.read_text() for path in table_pages(args.root) if path.is_file()}
    new = fill_pages(old, tables)
    problems = block_problems(old, tables)
    changed = [path for path in old if new[path] != old[path]]
    if args.check:
        for line in problems:
            print(line)
        for path in changed:
            print(f"{path}: its result tables differ from the leaderboards; run python scripts/readme_tables.py --write")
        if problems or changed:
            return 1
        holding = [str(path) for path, text in old.items() if block_names(text)]
        print(f"{', '.join(holding)}: every result table matches the leaderboards")
        return 0
    placed = [name for text in old.values() for name in block_names(text)]
    if len(placed) != len(set(placed)):
        for line in problems:
            print(line, file=sys.stderr)
        return 2  # a table placed twice: which copy is meant is not for this script to choose
    from jsbench.io import write_text_atomic

    for path in changed:
        write_text_atomic(path, new[path])
        print(f"wrote {path}")
    for line in problems:
        print(f"note: {line}")
    if not changed:
        print("every page: unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())

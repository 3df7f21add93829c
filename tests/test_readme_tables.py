"""The README's result tables are the committed leaderboards' (scripts/readme_tables.py)."""

from pathlib import Path

import pytest

from jsbench.readme_tables import WORLDS, fill_blocks, readme_tables, verdict

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_tables_are_the_leaderboards():
    readme = (ROOT / "README.md").read_text()
    tables = readme_tables(ROOT / "leaderboards")
    for name in [*WORLDS, "headline"]:
        assert f"<!-- table:{name} -->\n" in readme and f"<!-- /table:{name} -->" in readme, name
    assert fill_blocks(readme, tables) == readme, "run python scripts/readme_tables.py --write"


def test_fill_blocks_replaces_only_named_blocks():
    text = "a\n<!-- table:x -->\nold\n<!-- /table:x -->\nb\n<!-- table:y -->\nkeep\n<!-- /table:y -->\n"
    assert fill_blocks(text, {"x": "new\n"}) == "a\n<!-- table:x -->\nnew\n<!-- /table:x -->\nb\n<!-- table:y -->\nkeep\n<!-- /table:y -->\n"


@pytest.mark.parametrize("lo,hi,says", [(0.01, 0.05, "js above global"), (-0.05, -0.01, "global above js"), (-0.01, 0.05, "not resolved")])
def test_the_words_follow_the_interval(lo, hi, says):
    assert verdict({"a": "js", "b": "global", "ci_low": lo, "ci_high": hi}) == says

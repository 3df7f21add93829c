"""The result tables of README.md and docs/*.md are the committed leaderboards' (scripts/readme_tables.py)."""

import importlib.util
from pathlib import Path

import pytest

from jsbench.report.readme_tables import WORLDS, block_names, block_problems, fill_blocks, fill_pages, readme_tables, table_pages, baselines_list, verdict, weights_table

ROOT = Path(__file__).resolve().parents[1]
LEADERBOARDS = ROOT / "leaderboards"


def _script():
    spec = importlib.util.spec_from_file_location("readme_tables_script", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_every_page_s_tables_are_the_leaderboards():
    pages = {path: path.read_text() for path in table_pages(ROOT)}
    assert ROOT / "README.md" in pages and ROOT / "docs" / "results.md" in pages
    tables = readme_tables(ROOT / "leaderboards")
    assert set(tables) == {*WORLDS, "headline", "peers", "weights", "baselines"}
    assert block_problems(pages, tables) == []  # every table placed once, in one page, and nothing else
    assert "headline" in block_names(pages[ROOT / "README.md"])
    for path, text in fill_pages(pages, tables).items():
        assert text == pages[path], f"{path}: run python scripts/readme_tables.py --write"


def test_fill_blocks_replaces_only_named_blocks():
    text = "a\n<!-- table:x -->\nold\n<!-- /table:x -->\nb\n<!-- table:y -->\nkeep\n<!-- /table:y -->\n"
    assert fill_blocks(text, {"x": "new\n"}) == "a\n<!-- table:x -->\nnew\n<!-- /table:x -->\nb\n<!-- table:y -->\nkeep\n<!-- /table:y -->\n"


def test_block_problems_name_each_misplaced_block():
    a, b = Path("README.md"), Path("docs/a.md")
    block = "<!-- table:{0} -->\nold\n<!-- /table:{0} -->\n".format
    assert block_problems({a: block("x"), b: block("y")}, {"x": "", "y": ""}) == []
    twice = block_problems({a: block("x"), b: block("x") + block("y")}, {"x": "", "y": ""})
    assert len(twice) == 1 and "table:x is placed 2 times" in twice[0]
    assert block_problems({a: block("x") + block("z")}, {"x": ""}) == ["table:z (README.md) has no table: one of x"]
    assert block_problems({a: block("x")}, {"x": "", "y": ""}) == ["table:y is placed in no page"]
    unclosed = block_problems({a: block("x") + "<!-- table:y -->\nold\n"}, {"x": "", "y": ""})
    assert unclosed[0] == "README.md: <!-- table:y --> has no <!-- /table:y --> after it"


def test_the_script_writes_and_checks_the_readme_and_every_docs_page(tmp_path, capsys):
    script = _script()
    (tmp_path / "docs").mkdir()
    stale = "<!-- table:{0} -->\nstale\n<!-- /table:{0} -->\n".format
    (tmp_path / "README.md").write_text("# r\n" + stale("headline"))
    (tmp_path / "docs" / "results.md").write_text("".join(stale(name) for name in WORLDS))
    (tmp_path / "docs" / "real-backbones.md").write_text(stale("weights"))
    (tmp_path / "docs" / "DESIGN.md").write_text(stale("baselines"))
    (tmp_path / "docs" / "peer-methods.md").write_text(stale("peers"))
    (tmp_path / "docs" / "other.md").write_text("no tables\n")
    lb = ["--root", str(tmp_path), "--leaderboards", str(ROOT / "leaderboards")]
    assert script.main(["--check", *lb]) == 1
    assert "README.md: its result tables differ" in capsys.readouterr().out
    assert script.main(["--write", *lb]) == 0
    assert script.main(["--check", *lb]) == 0
    tables = readme_tables(ROOT / "leaderboards")
    assert tables["headline"] in (tmp_path / "README.md").read_text()
    assert all(tables[name] in (tmp_path / "docs" / "results.md").read_text() for name in WORLDS)
    assert tables["weights"] in (tmp_path / "docs" / "real-backbones.md").read_text()
    assert (tmp_path / "docs" / "other.md").read_text() == "no tables\n"
    # a table placed in two pages: --check fails, --write refuses (exit 2) and writes nothing
    (tmp_path / "docs" / "other.md").write_text(stale("detail"))
    capsys.readouterr()
    assert script.main(["--check", *lb]) == 1 and "table:detail is placed 2 times" in capsys.readouterr().out
    assert script.main(["--write", *lb]) == 2 and (tmp_path / "docs" / "other.md").read_text() == stale("detail")


@pytest.mark.parametrize("lo,hi,says", [(0.01, 0.05, "js above global"), (-0.05, -0.01, "global above js"), (-0.01, 0.05, "not resolved")])
def test_the_words_follow_the_interval(lo, hi, says):
    assert verdict({"a": "js", "b": "global", "ci_low": lo, "ci_high": hi}) == says


def test_the_weights_table_counts_each_published_pipeline():
    """bf16 GiB per component from the full-size configs on meta: the totals the card table quotes, SD3.5
    Medium's positional table included, and the distilled pair sharing its text encoders and VAE."""
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in weights_table().splitlines() if line.startswith("| ") and "GiB" not in line}
    assert rows["sd35"][4].rstrip(" |") == "15.15" and rows["flux-dev"][4].rstrip(" |") == "31.42"
    assert rows["flux-dev with `--distilled flux-schnell`"][4].rstrip(" |") == "53.57"


def test_the_baseline_list_names_every_registered_baseline():
    from jsbench.baselines import BASELINES

    lines = baselines_list().splitlines()
    assert [line.split("`")[1] for line in lines] == sorted(BASELINES, key=lambda n: BASELINES[n].lab_order)
    assert "`jspo`" in baselines_list() and "(K >= 2, B >= 3)" in lines[3]


def test_the_peers_table_has_a_line_per_section_with_a_peer_row(tmp_path):
    import csv
    import shutil

    from jsbench.report.readme_tables import peers_table

    with open(LEADERBOARDS / "geneval.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    kept = [r for r in rows if not (r["method"] == "indis" and r["steps"] == "5")]  # analytic 5 loses its distilled row
    with open(tmp_path / "geneval.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(kept)
    shutil.copy(LEADERBOARDS / "geneval.contrasts.csv", tmp_path)
    table = peers_table(tmp_path)
    values, contrasts = table.split("\n\n")[:2]
    sections = [line.split(" | ")[:2] for line in values.splitlines()[2:]]
    peer_sections = {(r["backbone"], r["steps"]) for r in kept if r["method"] in ("tpdm (js)", "indis")}
    assert {(w.strip("| "), n) for w, n in sections} == peer_sections
    line = next(l for l in values.splitlines() if l.startswith("| analytic | 5 |"))
    assert line.split(" | ")[4] == "–"  # no indis row: a dash, not a number
    assert all(l.count("[") == l.count("]") for l in contrasts.splitlines())
    teacher = table.split("\n\n")[2].splitlines()
    assert teacher[0] == "| world | steps | one-shot − teacher match | step-by-step − teacher match | distilled − teacher match |"
    assert len(teacher) == 2 + len(peer_sections)  # a line per section: its intervals, or – until the section is rerun

"""The README is a first hour's read and the docs/ pages hold the rest: the README's length, every relative
link of README.md and docs/*.md (file and heading), every page reached from the README, and the install
and test commands that `.ci/run` runs still the README's."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_LINES = 250


def _prose(text: str) -> str:
    """`text` without its fenced code blocks, where a bracket is no link."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _links(path: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", _prose(path.read_text()))


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", _prose(path.read_text()), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_the_readme_fits_its_budget():
    lines = len(README.read_text().splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines; move a topic to docs/ (one page each)"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file(page):
    for link in _links(page):
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.relative_to(ROOT)}: {link} points to no file"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{page.relative_to(ROOT)}: {link}: no such heading"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in _links(README)}
    assert [p.name for p in PAGES[1:] if p.resolve() not in linked] == []


def test_ci_installs_and_tests_with_the_readmes_commands():
    """`.ci/run` runs the README's set-up commands (each with pip's -q, as `python -m`): they are the
    README's first bash block, word for word."""
    setup = re.search(r"^## Set-up\n.*?```bash\n(.*?)```", README.read_text(), re.S | re.M).group(1)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.replace("python -m pip install -q ", "pip install ") for line in ci
                if line.startswith(("python -m pip install", "python -m pytest"))]
    assert len(commands) == 3, commands
    for command in commands:
        assert command in setup, command
    assert "tesseract-ocr" in setup and "jsbench compare --check" in setup

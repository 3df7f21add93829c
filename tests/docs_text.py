"""Text the tests read from the documentation, each from its one place."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CI_PAGE = ROOT / "docs" / "ci.md"  # the regression report's page holds the GitHub Actions workflow example


def workflow_example() -> str:
    """The GitHub Actions workflow example: the one ```yaml block of docs/ci.md."""
    blocks = re.findall(r"```yaml\n(.*?)```", CI_PAGE.read_text(), re.S)
    assert len(blocks) == 1, f"{CI_PAGE}: {len(blocks)} yaml blocks, expected the workflow alone"
    return blocks[0]

"""Help that fits 80 columns, grouped into panels, naming every backbone and suite; the committed CI
workflow is the README's."""

import re
from pathlib import Path

import pytest

from jsbench.registry import declared_names
from jsbench.suites import declared_suites

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["train"], ["eval"], ["compare"], ["schedules", "plot"], ["policies", "list"], ["prompts"]])
def test_help_fits_80_columns_and_cuts_nothing(cli, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli(*command, "--help")
    assert code == 0, err
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in out
    assert len(lines) <= 100, f"{command}: {len(lines)} lines"


def test_options_are_grouped_and_name_every_backbone_and_suite(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    backbones = declared_names("jsbench.backbones")
    assert {"analytic", "sdxl", "detail", "scenes-dit"} <= set(backbones)
    for command, panels in (("train", ["Run", "Training", "Optimizer", "Backbone"]),
                            ("eval", ["Run", "Backbone", "Output"]),
                            ("compare", ["Run", "Backbone", "Output", "Check (--check)"])):
        code, out, _ = cli(command, "--help")
        flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())
        assert all(f"─ {p} ─" in out for p in panels), command
        assert all(name in flat for name in backbones), command
        if command != "train":
            assert all(name in flat for name in declared_suites()), command


def test_the_committed_workflow_is_the_readmes():
    readme = re.search(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    workflow = (ROOT / ".github" / "workflows" / "jsbench.yml").read_text()
    assert workflow == readme
    assert "--junitxml" in workflow and "GITHUB_STEP_SUMMARY" in workflow and "report_paths" in workflow

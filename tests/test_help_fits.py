"""Help that fits 80 columns, grouped into panels, naming every backbone and suite; the committed CI
workflow is the documented one (docs/ci.md)."""

import re
from pathlib import Path

import pytest

from docs_text import workflow_example
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
        assert all(name in flat for name in declared_suites()), command


def test_the_committed_workflow_is_the_documented_one():
    workflow = (ROOT / ".github" / "workflows" / "jsbench.yml").read_text()
    assert workflow == workflow_example()
    assert "--junitxml" in workflow and "GITHUB_STEP_SUMMARY" in workflow and "report_paths" in workflow


def test_the_check_table_keeps_every_column_at_80_columns():
    from types import SimpleNamespace as Row

    from rich.console import Console

    from jsbench.commands.tables import CHECK_COLUMNS, check_table

    rows = [Row(verdict=v, changed=True, steps=n, method=m, task=t, committed=0.8123, fresh=0.7012, delta=-0.1111,
                delta_stderr=0.0234, paired=paired, allowed_drop=0.0468, images_up=12, images_down=140, n_images=1152)
            for v, n, m, t, paired in [("regressed", 5, "js (prompt-only)", "single_object", True),
                                       ("improved", 200, "ceiling (200 steps)", "color_attr", False),
                                       ("missing", 3, "flux-schnell (4 steps, distilled)", "overall", True)]]
    console = Console(width=80, record=True)
    console.print(check_table(Row(rows=rows, tolerance=2.0)))
    out = console.export_text()
    assert max(map(len, out.splitlines())) <= 80 and "…" not in out
    joined = "".join(out.split())
    for text in [*(word for col in CHECK_COLUMNS for word in col.split()), "regressed", "improved", "missing", "0.812", "0.701", "-0.1111", "±0.0234", "±0.0234*",
                 "0.0468", "↑12↓140", "of1152", "200"]:
        assert "".join(text.split()) in joined, text
    for name in ("js(prompt-only)single_object", "flux-schnell(4steps,distilled)overall"):  # folded, in order, not cut
        rest = iter(joined)
        assert all(ch in rest for ch in name), name


def test_declared_names_read_without_importing_are_the_registries():
    import jsbench.backbones as backbones
    import jsbench.rewards as rewards

    assert declared_names("jsbench.backbones") == tuple(backbones._MODULES)
    assert declared_names("jsbench.rewards") == tuple(rewards._MODULES)

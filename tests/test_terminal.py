"""What a person sees in a terminal: help, version, 80-column tables, exact piped output, quiet loading (issue 16)."""

import csv
import io
import json
import logging

import pytest
import typer

from jsbench import __version__
from jsbench.cli import app


def _commands(group=None, prefix=()):
    import typer.main

    group = group or typer.main.get_command(app)
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


def test_every_option_is_described_and_no_flag_is_tagged_bool(cli):
    for path, cmd in _commands():
        for param in cmd.params:
            if param.param_type_name == "option":
                assert (param.help or "").strip(), f"jsbench {' '.join(path)} {param.opts[0]} has no description"
        code, out, err = cli(*path, "--help")
        assert code == 0, err
        assert "<bool>" not in out, f"jsbench {' '.join(path)} --help tags a flag <bool>"
        assert "--help" in out


def test_version(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == f"jsbench {__version__}"


def test_train_help_names_the_default_baseline(cli):
    code, out, _ = cli("train", "--help")
    assert "leave-one-out baseline" not in out and "default js" in out


def test_tables_fit_80_columns_without_cutting_words(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("policies", "list")
    assert code == 0, err
    assert "…" not in out and max(map(len, out.splitlines())) <= 80
    assert "analytic/xctx-n5" in out and "scenes-dit" in out
    code, out, err = cli("eval", "--steps", "3", "--seeds", "1", "--out", "r.jsonl", "--no-progress")
    assert code == 0, err
    assert "…" not in out and max(map(len, out.splitlines())) <= 80 and "color_attr" in out


def test_piped_output_is_exact_csv_and_json(cli):
    code, out, err = cli("eval", "--steps", "3", "--seeds", "1", "--out", "r.jsonl", "--no-progress", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))  # nothing but the CSV on stdout
    assert {r["task"] for r in rows} >= {"overall", "counting"}
    records = [json.loads(line) for line in open("r.jsonl")]
    exact = {r["task"]: r["value"] for r in records}
    assert all(float(r["value"]) == exact[r["task"]] for r in rows)  # full precision, not 3 decimals
    code, out, err = cli("eval", "--steps", "3", "--seeds", "1", "--out", "r.jsonl", "--no-progress", "--format", "json")
    assert code == 0, err
    assert {r["task"] for r in json.loads(out)} >= {"overall"}
    code, out, err = cli("policies", "list", "--format", "json")
    assert code == 0 and all(len(p["checksum"]) == 64 for p in json.loads(out))


def test_torchvision_fallback_warning_is_dropped():
    from jsbench.progress import quiet_model_loading

    class Collect(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    quiet_model_loading(show_bars=True)
    logger = logging.getLogger("transformers.utils.import_utils")  # transformers' logger does not propagate
    seen = Collect()
    logger.addHandler(seen)
    try:
        logger.warning("`CLIPImageProcessor` requires torchvision (not installed); falling back to `CLIPImageProcessorPil`")
        logger.warning("something else")
    finally:
        logger.removeHandler(seen)
    assert seen.messages == ["something else"]


def test_no_progress_hides_the_libraries_loading_bars():
    pytest.importorskip("diffusers")
    from diffusers.utils import logging as diffusers_logging

    from jsbench.progress import quiet_model_loading

    try:
        quiet_model_loading(show_bars=False)
        assert not diffusers_logging.is_progress_bar_enabled()
    finally:
        diffusers_logging.enable_progress_bar()


def test_eval_progress_moves_per_small_batch():
    from jsbench.backbones import load_backbone
    from jsbench.evaluation.evaluate import evaluate, resolve_schedule
    from jsbench.suites import load_suite

    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    steps = []
    run = evaluate(bb, suite, resolve_schedule("default", bb, 3), seeds_per_prompt=2, progress=False, on_images=steps.append)
    total = len(run.items) * 2
    assert sum(steps) == total and max(steps) <= 64 and len(steps) >= total // 64
    # the batch size changes when the bar moves, not a single score
    again = evaluate(bb, suite, resolve_schedule("default", bb, 3), seeds_per_prompt=2, progress=False, batch_size=512)
    assert again.scores == run.scores


def test_figure_labels_are_unique_and_grids_mark_pass_and_fail(tmp_path):
    from types import SimpleNamespace

    from jsbench.backbones import load_backbone
    from jsbench.report.compare import suite_verdicts
    from jsbench.evaluation.evaluate import resolve_schedule
    from jsbench.report.plots import plot_image_grid, unique_labels
    from jsbench.suites import load_suite

    src = lambda label, spec: SimpleNamespace(label=label, spec=spec)
    assert unique_labels([src("js", "policy:runs/a/js-n5"), src("js", "policy:runs/b/js-k8"), src("default", "default")]) == [
        "js (js-n5)", "js (js-k8)", "default"]
    assert unique_labels([src("js", "policy:runs/a/js-n5"), src("js", "policy:runs/b/js-n5")]) == ["js (runs/a/js-n5)", "js (runs/b/js-n5)"]
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    items = suite.items("test")
    prompts = [items[0].prompt, items[-1].prompt]
    seen = []

    def passed(images, ps):
        verdicts = suite_verdicts(suite, items)(images, ps)
        seen.append(verdicts)
        return verdicts

    sources = [resolve_schedule("default", bb, 3), resolve_schedule("ceiling", bb, 3)]
    path = plot_image_grid(bb, sources, prompts, 0, tmp_path / "grid.png", passed)
    assert path.stat().st_size > 1000 and len(seen) == 2 and all(v in (True, False) for row in seen for v in row)


def test_policies_table_folds_a_long_path_and_keeps_the_other_columns():
    from rich.console import Console

    from jsbench.commands.tables import policies_table

    rows = [{"_short": "b/" + "x" * 60 + "/seed0", "backbone": "b", "steps": 3, "kind": "instance", "arch": "xattn",
             "baseline": "js", "reward": "geneval", "converged": False}]
    console = Console(width=80, record=True)
    console.print(policies_table(rows, "root"))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    for cell in ("instance", "xattn", "baseline", "geneval", "seed0 †"):
        assert cell in text, text

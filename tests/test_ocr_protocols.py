"""OCR scored as MARIO-Eval's ocr_eval.py scores it (`--ocr-protocol mario`) and Flow-GRPO's OCR reward as
its flow_grpo/ocr.py computes it (`--reward ocr-flowgrpo`): one hand-built case per rule of each, the value
worked out by hand from the rule, with a fake OCR engine (no engine runs, nothing is drawn)."""

from __future__ import annotations

import pytest
import torch

from jsbench import JsbenchError
from jsbench.scoring.flowgrpo import flowgrpo_reward, flowgrpo_target
from jsbench.scoring.mario import mario_f_measure, mario_image_metrics, mario_pooled, mario_targets
from jsbench.scoring.text import image_metrics
from jsbench.suites import suite_options
from jsbench.suites.base import EvalItem
from jsbench.suites.ocr import OcrSuite

EPS = 1e-8  # ocr_eval.py divides by (n + 1e-8)


class FakeEngine:
    """An OCR engine whose detections are given: image i reads `detections[i]`."""

    name = "fake"

    def __init__(self, detections):
        self.detections = [tuple(d) for d in detections]

    def read_lines(self, images):
        return self.detections[: images.shape[0]]

    def read(self, images):
        return [" ".join(" ".join(t.split()) for t in d if t.strip()) for d in self.read_lines(images)]


def mario(detections, prompt):
    return mario_image_metrics(detections, prompt)


# ------------------------------------------------------------------------------ MARIO-Eval, per rule


def test_reading_unit_each_detection_is_one_token_never_split():
    prompt = "a sign that says 'hello world'"
    # one line reading both words is one token: it matches neither target word, and joins with its space
    assert mario(["hello world"], prompt) == {"accuracy": 0.0, "precision": 0.0, "recall": 0.0}
    # jsbench's `words` reading splits it and reads both
    assert image_metrics("hello world", prompt)["precision"] == 1.0 and image_metrics("hello world", prompt)["accuracy"] == 1.0
    # two detections, one word each: 2 matched of 2 read, 2 of 2 targets
    assert mario(["Hello", "WORLD"], prompt) == {"accuracy": 1.0, "precision": 2 / (2 + EPS), "recall": 2 / (2 + EPS)}


def test_a_blank_detection_is_a_read_token():
    # read ["open", ""]: 1 matched of 2 read tokens; the blank sorts first and joins to nothing
    assert mario(["open", ""], "a sign that says 'open'") == {"accuracy": 1.0, "precision": 1 / (2 + EPS), "recall": 1 / (1 + EPS)}
    # whitespace only is blank once stripped
    assert mario(["  ", "open"], "'open'")["precision"] == 1 / (2 + EPS)


def test_targets_are_the_spans_inside_ascii_single_quotes():
    # non-greedy '(.*?)': the apostrophe of Joe's closes the span, so the target is `joe` alone
    assert mario_targets("A sign for 'Joe's Diner'") == ["joe"]
    assert mario(["Joe's", "Diner"], "A sign for 'Joe's Diner'") == {"accuracy": 0.0, "precision": 0.0, "recall": 0.0}
    assert mario(["JOE"], "A sign for 'Joe's Diner'") == {"accuracy": 1.0, "precision": 1 / (1 + EPS), "recall": 1 / (1 + EPS)}
    # every span, split on whitespace, lowercased
    assert mario_targets("'Open' and 'Late  Night'") == ["open", "late", "night"]
    # double and curly quotes mark nothing
    assert mario_targets('a sign that says "river"') == []
    assert mario_targets("a sign that says \u2018river\u2019") == []


def test_a_prompt_without_a_target_scores_zero_zero_and_accuracy_for_reading_nothing():
    prompt = 'a sign that says "river"'  # the text world's quoting: no single-quoted span
    assert mario([], prompt) == {"accuracy": 1.0, "precision": 0.0, "recall": 0.0}
    assert mario([""], prompt) == {"accuracy": 1.0, "precision": 0.0, "recall": 0.0}  # '' joined is ''
    assert mario(["river"], prompt) == {"accuracy": 0.0, "precision": 0.0, "recall": 0.0}  # reading the text is wrong


def test_matching_is_a_multiset_and_accuracy_a_sorted_join():
    # three 'go' read, two asked for: 2 matched; 'gogogo' != 'gogo'
    assert mario(["go", "go", "go"], "'go go'") == {"accuracy": 0.0, "precision": 2 / (3 + EPS), "recall": 2 / (2 + EPS)}
    # 'ab' + 'c' joins as 'a' + 'bc' does: accuracy 1 with nothing matched
    assert mario(["ab", "c"], "'a bc'") == {"accuracy": 1.0, "precision": 0.0, "recall": 0.0}


def test_pooling_means_every_image_and_f_from_the_pooled_means():
    scores = [
        {"precision": 1.0, "recall": 0.5, "accuracy": 0.0},
        {"precision": 0.5, "recall": 1.0, "accuracy": 1.0},
        {"precision": 0.0, "recall": 0.0, "accuracy": 1.0},
    ]
    pooled = mario_pooled(scores)
    assert pooled["precision"] == 0.5 and pooled["recall"] == 0.5 and pooled["accuracy"] == 2 / 3
    assert pooled["f_measure"] == 2 * 0.5 * 0.5 / (0.5 + 0.5 + EPS)
    assert mario_f_measure(0.0, 0.0) == 0.0


# ------------------------------------------------------------------------------ the suite under each protocol


@pytest.fixture
def single_quoted(tmp_path):
    path = tmp_path / "mario.txt"
    path.write_text("a sign that says 'open'\na sign that says 'jazz night'\na mug with 'go on now'\n", encoding="utf-8")
    return str(path)


def test_the_suite_scores_and_pools_as_mario(single_quoted, monkeypatch):
    suite = OcrSuite(prompts_file=single_quoted, protocol="mario")
    assert suite.primary_metric == "accuracy" and suite.leaderboard_metrics == ("accuracy", "precision", "recall", "f_measure")
    assert suite.provenance() == {"ocr_engine": "rapidocr", "protocol": "mario"}
    items = suite.items("all")
    detections = [["OPEN"], ["jazz night"], ["go", "on", "now", ""]]
    monkeypatch.setattr(suite, "_engine", FakeEngine(detections))
    scores = suite.score(torch.zeros(3, 3, 8, 8), items)
    assert scores == [
        {"accuracy": 1.0, "precision": 1 / (1 + EPS), "recall": 1 / (1 + EPS)},
        {"accuracy": 0.0, "precision": 0.0, "recall": 0.0},
        {"accuracy": 1.0, "precision": 3 / (4 + EPS), "recall": 3 / (3 + EPS)},
    ]
    metrics = {(m.task, m.metric): m.value for m in suite.aggregate(scores, items)}
    pooled = mario_pooled(scores)
    assert metrics[("overall", "accuracy")] == pytest.approx(2 / 3, abs=1e-15)
    for name in ("accuracy", "precision", "recall", "f_measure"):
        assert metrics[("overall", name)] == pytest.approx(pooled[name], abs=1e-15), name
    assert {k for _, k in metrics} == {"accuracy", "precision", "recall", "f_measure"}


def test_mario_is_the_default_and_words_reads_as_before_by_name(single_quoted, monkeypatch):
    assert OcrSuite().protocol == "mario" and OcrSuite().primary_metric == "accuracy"
    suite = OcrSuite(prompts_file=single_quoted, protocol="words")
    assert suite.protocol == "words" and suite.primary_metric == "word_accuracy"
    assert suite.provenance() == {"ocr_engine": "rapidocr", "protocol": "words"}
    items = suite.items("all")
    monkeypatch.setattr(suite, "_engine", FakeEngine([["OPEN"], ["jazz night"], ["go", "on", "now", ""]]))
    scores = suite.score(torch.zeros(3, 3, 8, 8), items)
    assert [s["word_accuracy"] for s in scores] == [1.0, 1.0, 1.0]
    assert scores[1] == image_metrics("jazz night", items[1].prompt)


def test_mario_finds_every_target_of_the_text_worlds_prompts(monkeypatch):
    """The text world quotes MARIO's way (single quotes, no apostrophe inside a target), so MARIO's targets are
    the words the world draws, for every prompt of the suite."""
    suite = OcrSuite()
    assert all(mario_targets(it.prompt) == it.metadata["targets"] for it in suite.items("all"))
    items = [it for it in suite.items("test") if it.task == "two_words"][:1] + [it for it in suite.items("test") if it.task == "one_word"][:2]
    a, b = items[0].metadata["targets"]
    # word by word in either order: accuracy 1; one line holding both words: one token, matching neither
    monkeypatch.setattr(suite, "_engine", FakeEngine([[b.upper(), a], items[1].metadata["targets"], [f"{items[2].metadata['targets'][0]} x"]]))
    scores = suite.score(torch.zeros(3, 3, 8, 8), items)
    assert scores[0] == {"accuracy": 1.0, "precision": 2 / (2 + EPS), "recall": 2 / (2 + EPS)}
    assert scores[1] == {"accuracy": 1.0, "precision": 1 / (1 + EPS), "recall": 1 / (1 + EPS)}
    assert scores[2] == {"accuracy": 0.0, "precision": 0.0, "recall": 0.0}


def test_an_engine_without_detections_is_refused_under_mario(single_quoted, monkeypatch):
    class JoinedOnly:
        name = "joined"

        def read(self, images):
            return ["open"] * images.shape[0]

    suite = OcrSuite(prompts_file=single_quoted, protocol="mario")
    monkeypatch.setattr(suite, "_engine", JoinedOnly())
    with pytest.raises(JsbenchError, match="joined.*read_lines"):
        suite.score(torch.zeros(1, 3, 8, 8), suite.items("all")[:1])


def test_protocol_options_are_refused_in_one_line():
    assert suite_options("ocr", None) == {} and suite_options("ocr", "mario") == {"protocol": "mario"}
    with pytest.raises(JsbenchError, match="unknown --ocr-protocol 'paper'.*words or mario"):
        suite_options("ocr", "paper")
    with pytest.raises(JsbenchError, match="--suite geneval reads none"):
        suite_options("geneval", "mario")
    with pytest.raises(JsbenchError, match="unknown OCR protocol"):
        OcrSuite(protocol="paper")


@pytest.mark.parametrize("command", [["eval"], ["compare"], ["train", "--out", "RUN"]])
def test_the_cli_refuses_ocr_protocol_off_the_ocr_suite_before_loading(cli, command, monkeypatch, tmp_path):
    import jsbench.backbones as backbones

    monkeypatch.setattr(backbones, "load_backbone", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    args = [str(tmp_path / a) if a == "RUN" else a for a in command]
    code, out, err = cli(*args, "--suite", "geneval", "--ocr-protocol", "mario", "--steps", "3", "--no-progress")
    assert code == 2 and err.strip().count("\n") == 0 and "--ocr-protocol" in err


def test_compare_names_the_protocol_in_its_command_and_recipe():
    from jsbench.report.compare_request import CompareRequest, compare_command, recipe_request

    assert compare_command(CompareRequest(suite="ocr", steps=(3,), ocr_protocol="mario")).endswith("--ocr-protocol mario")
    assert "--ocr-protocol" not in compare_command(CompareRequest(suite="ocr", steps=(3,)))
    run = {"suite": "ocr", "backbone": "analytic", "steps": [3], "seed_base": 0, "ocr_protocol": "mario"}
    assert "--ocr-protocol mario" in compare_command(recipe_request(run))


# ------------------------------------------------------------------------------ sections of one protocol


def test_check_never_pairs_two_protocols():
    """A committed OCR section without a recorded protocol was scored by `words`: a `mario` run is not paired
    with it (its rows are missing, the protocol named), a `words` run is."""
    from test_report import BASE, KEY, TwoTasks, _committed, _run

    from jsbench.report.regression_check import check_against_committed

    class OcrLike(TwoTasks):
        unrecorded_provenance = {"protocol": "words"}

    lines, scores = _committed(KEY, _run(BASE))
    report = check_against_committed(lines, scores, {KEY: _run(BASE)}, OcrLike(), KEY[0], KEY[1], [3], provenance={"protocol": "mario"})
    assert {r.verdict for r in report.rows} == {"missing"} and "protocol words (this run: mario)" in report.rows[0].note
    report = check_against_committed(lines, scores, {KEY: _run(BASE)}, OcrLike(), KEY[0], KEY[1], [3], provenance={"protocol": "words"})
    assert report.count("unchanged") == 3


def test_a_section_of_another_protocol_is_kept_beside_the_fresh_one():
    from jsbench.report.leaderboard import Table, merge_tables
    from jsbench.report.metric_tables import merge_metric_rows, render_metric_tables

    old = Table("analytic", "m", 3, ["a"], [], "", {"ocr_engine": "rapidocr"})
    mario_section = Table("analytic", "m", 3, ["a"], [], "", {"ocr_engine": "rapidocr", "protocol": "mario"})
    words_section = Table("analytic", "m", 3, ["a"], [], "", {"ocr_engine": "rapidocr", "protocol": "words"})
    unrecorded = OcrSuite.unrecorded_provenance
    assert sorted(t.provenance.get("protocol", "") for t in merge_tables([old], [mario_section], unrecorded)) == ["", "mario"]
    assert merge_tables([old], [words_section], unrecorded) == [words_section]

    def row(metric, protocol):
        return {"backbone": "analytic", "model_id": "m", "steps": "3", "method": "default", "task": "overall", "metric": metric,
                "value": "0.5", "stderr": "0.1", "protocol": protocol}

    committed = [row("word_accuracy", "")]
    merged = merge_metric_rows(committed, [row("accuracy", "mario")], unrecorded)
    assert [r["protocol"] for r in merged] == ["", "mario"]
    assert [r["protocol"] for r in merge_metric_rows(committed, [row("word_accuracy", "words")], unrecorded)] == ["words"]
    page = render_metric_tables(merged, OcrSuite.all_leaderboard_metrics, unrecorded=unrecorded)
    assert "### analytic · 3 steps · protocol mario" in page and "### analytic · 3 steps · protocol words" in page
    assert "### analytic · 3 steps\n" in render_metric_tables(committed, OcrSuite.all_leaderboard_metrics, unrecorded=unrecorded)


# ------------------------------------------------------------------------------ Flow-GRPO's OCR reward, per rule


def test_flowgrpo_target_is_the_first_double_quoted_span():
    assert flowgrpo_target('a "Hello World" sign beside "x"') == "Hello World"
    assert flowgrpo_target('a sign "open late') == "open late"  # no closing quote: to the end, as split('"')[1]
    for prompt in ("a sign that says 'open'", "a sign that says \u201copen\u201d", "no quotes"):
        with pytest.raises(JsbenchError, match="double-quoted"):
            flowgrpo_target(prompt)


def test_flowgrpo_reward_rules():
    # detections joined with no separator, spaces removed, lowercased; the target contained: full reward
    assert flowgrpo_reward(["HELLO", "WORLD"], 'a "Hello World" sign and "x"') == 1.0
    assert flowgrpo_reward(["riv", "er"], 'a "river"') == 1.0
    assert flowgrpo_reward(["xxRIVERxx"], 'a "river"') == 1.0
    # else 1 - dist / len: one deletion away from 'river'
    assert flowgrpo_reward(["rivr"], 'a "river"') == 1 - 1 / 5
    # only ASCII spaces go: a tab stays and costs one edit ('open\tlate' vs 'openlate')
    assert flowgrpo_reward(["open\tlate"], 'a "open late"') == 1 - 1 / 8
    # the distance is capped at the target's length: nothing alike, or nothing read, is 0
    assert flowgrpo_reward(["zzzzzzzz"], 'a "go"') == 0.0
    assert flowgrpo_reward([], 'a "river"') == 0.0
    with pytest.raises(JsbenchError, match="non-empty"):
        flowgrpo_reward(["x"], 'a sign "  " here')


def test_flowgrpo_reward_is_registered_and_names_itself():
    from jsbench.registry import declared_names
    from jsbench.rewards import available_rewards
    from jsbench.rewards.ocr import FlowGrpoOcrReward

    assert "ocr-flowgrpo" in available_rewards() and "ocr-flowgrpo" in declared_names("jsbench.rewards")
    reward = FlowGrpoOcrReward(FakeEngine([["RIVER"], ["rivr"], ["good", "morning"]]))
    assert reward.name == "ocr-flowgrpo" and reward.provenance() == {"reward": "ocr-flowgrpo", "ocr_engine": "fake"}
    values = reward(torch.zeros(3, 3, 8, 8), ['a sign "river"', 'a sign "river"', 'a mug "Good Morning" and "x"'])
    assert values.dtype == torch.float32 and values.tolist() == pytest.approx([1.0, 0.8, 1.0])
    with pytest.raises(JsbenchError, match="double-quoted"):
        reward(torch.zeros(1, 3, 8, 8), ["a sign 'river'"])


def test_training_ocr_flowgrpo_on_single_quoted_prompts_is_refused_before_anything_is_written(cli, tmp_path):
    """The text world quotes MARIO's way, so Flow-GRPO's rule (the first double-quoted span) scores none of
    its prompts: one line, exit 2, no run folder."""
    out = tmp_path / "run"
    code, _, err = cli("train", "--backbone", "analytic", "--reward", "ocr-flowgrpo", "--suite", "ocr", "--iters", "1",
                       "--contexts", "4", "--samples", "2", "--steps", "3", "--no-progress", "--out", str(out))
    assert code == 2 and "double-quoted target" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


FLOWGRPO_PROMPTS = ['a sign that says "river"', 'a mug with the text "open"', 'a poster that says "jazz"', 'a banner that says "cafe"',
                    'a label with the text "sale"', 'a sign that says "bread"', 'a mug with the text "lemon"', 'a poster that says "moon"']


def test_training_ocr_flowgrpo_on_a_prompts_file_that_quotes_its_way(cli, tmp_path):
    """Flow-GRPO's reward trains on prompts quoted its way, given with --prompts-file (3 in 4 train, the
    4th held out, as the ocr suite splits its own), and the manifest records both."""
    import json

    prompts = tmp_path / "flowgrpo.txt"
    prompts.write_text("\n".join(FLOWGRPO_PROMPTS) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    code, _, err = cli("train", "--backbone", "analytic", "--reward", "ocr-flowgrpo", "--suite", "ocr", "--prompts-file", str(prompts),
                       "--iters", "1", "--contexts", "4", "--samples", "2", "--steps", "3", "--heldout", "0", "--no-progress", "--out", str(out))
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["reward"] == "ocr-flowgrpo" and f"--prompts-file {prompts}" in manifest["command"]
    assert manifest["train"]["prompts_file"] == str(prompts)


@pytest.mark.parametrize("case", ["other suite", "no file", "bad line"])
def test_a_training_prompts_file_is_refused_in_one_line_before_anything_is_written(cli, tmp_path, case):
    prompts = tmp_path / "p.txt"
    prompts.write_text('a sign that says "river"\na sign that says "déjà vu"\n' if case == "bad line" else 'a sign that says "river"\n', encoding="utf-8")
    suite = "geneval" if case == "other suite" else "ocr"
    path = tmp_path / "missing.txt" if case == "no file" else prompts
    out = tmp_path / "run"
    code, _, err = cli("train", "--backbone", "analytic", "--reward", "ocr", "--suite", suite, "--prompts-file", str(path), "--iters", "1",
                       "--contexts", "4", "--samples", "2", "--steps", "3", "--no-progress", "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert {"other suite": "--suite geneval has its own", "no file": "no such file", "bad line": ":2"}[case] in err
    assert not out.exists()

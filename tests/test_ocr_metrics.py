"""MARIO-Eval metrics and the OCR reward: pure functions, checked on hand-worked examples."""

from __future__ import annotations

import math

import pytest

from jsbench.scoring.text import (
    edit_distance,
    exact_match,
    f_measure,
    image_metrics,
    match_precision_recall,
    normalized_edit_distance,
    ocr_reward,
    read_words,
    target_words,
    word_accuracy,
)
from jsbench.suites.base import EvalItem
from jsbench.suites.ocr import OcrSuite, f_measure_metrics


def test_targets_are_the_quoted_words_lowercased():
    assert target_words('a sign that says "Hello World"') == ["hello", "world"]
    assert target_words('a mug with “Good” and "Morning"') == ["good", "morning"]
    # MARIO-Eval's own prompts quote with single quotes
    assert target_words("a book cover with the title 'Deep Learning'") == ["deep", "learning"]
    assert target_words("a photo of a red circle") == []
    # an apostrophe inside a word opens no span; one inside a quoted span stays in it
    assert target_words("don't forget 'milk'") == ["milk"]
    assert target_words("'Open' written on 'Mike's bar'") == ["open", "mike's", "bar"]
    assert read_words("  RIVER   Bank\tx ") == ["river", "bank", "x"]


def test_multiset_matching_precision_recall():
    # read 3 words, one matches a target; 'hello' is matched once only (multiset), 'wrld' never
    assert match_precision_recall(["hello", "hello", "wrld"], ["hello", "world"]) == (1 / 3, 1 / 2)
    # a repeated target word must be read as often as it is asked for
    assert match_precision_recall(["go"], ["go", "go"]) == (1.0, 0.5)
    assert match_precision_recall(["GO", "go"], ["go", "Go"]) == (1.0, 1.0)
    # nothing read: precision 0 (MARIO divides by len + 1e-8), recall 0
    assert match_precision_recall([], ["stop"]) == (0.0, 0.0)


def test_word_accuracy_needs_every_target_word():
    assert word_accuracy(["open", "sale", "extra"], ["sale", "open"]) == 1.0
    assert word_accuracy(["open"], ["sale", "open"]) == 0.0
    assert word_accuracy(["go"], ["go", "go"]) == 0.0


def test_exact_match_is_marios_sorted_join():
    assert exact_match(["world", "hello"], ["hello", "world"]) == 1.0
    assert exact_match(["hello", "world", "x"], ["hello", "world"]) == 0.0
    # MARIO's quirk, kept on purpose: the joined strings are compared, not the words
    assert exact_match(["hell", "oworld"], ["hello", "world"]) == 1.0
    assert match_precision_recall(["hell", "oworld"], ["hello", "world"]) == (0.0, 0.0)


def test_edit_distance():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("abc", "abc") == 0
    assert edit_distance("flaw", "lawn") == 2
    assert edit_distance("café", "cafe") == 1  # characters, not bytes


def reference_edit_distance(a: str, b: str) -> int:
    """The textbook Wagner-Fischer table, written independently of the library the metric uses."""
    table = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return table[len(a)][len(b)]


def test_edit_distance_equals_the_textbook_table_on_random_pairs():
    import random

    rng = random.Random(15)
    alphabets = ["ab", "abcde", "helo wrd", "abcdefghijklmnopqrstuvwxyz0123456789", "aéß€漢字"]
    for _ in range(1000):
        letters = rng.choice(alphabets)
        a = "".join(rng.choice(letters) for _ in range(rng.randint(0, 24)))
        b = "".join(rng.choice(letters) for _ in range(rng.randint(0, 24)))
        assert edit_distance(a, b) == reference_edit_distance(a, b), (a, b)
    # long strings take the library's multi-word bit-parallel path (> 64 characters)
    for _ in range(20):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(60, 150)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(60, 150)))
        assert edit_distance(a, b) == reference_edit_distance(a, b)


def test_normalized_edit_distance_on_space_free_lowercase():
    # "heloworld" vs "helloworld": one insertion over max length 10
    assert normalized_edit_distance("Helo World", "hello world") == pytest.approx(0.1)
    assert normalized_edit_distance("", "stop") == 1.0
    assert normalized_edit_distance("S T O P", "stop") == 0.0


def test_ocr_reward_formula():
    # target "helloworld" has 10 characters; "helowrld" is 2 deletions away
    assert ocr_reward("helo wrld", "hello world") == pytest.approx(0.8)
    assert ocr_reward("HELLO  WORLD", "hello world") == 1.0
    assert ocr_reward("", "hello world") == 0.0
    # the distance is clipped at the target length: long garbage scores 0, never negative
    assert ocr_reward("x" * 40, "hello world") == 0.0
    # "thehelloworldsign" is 7 insertions away (0.3 by the plain formula), but Flow-GRPO's code, and so this
    # reward by default, counts a target contained in the read text as exact
    assert ocr_reward("the hello world sign", "hello world") == 1.0
    assert ocr_reward("the hello world sign", "hello world", contains_ok=False) == pytest.approx(0.3)
    assert ocr_reward("hello", "hello world") == pytest.approx(0.5)  # a part of the target is not contained
    with pytest.raises(ValueError):
        ocr_reward("x", "  ")


def test_f_measure_from_precision_and_recall():
    assert f_measure(0.5, 1.0) == pytest.approx(2 / 3)
    assert f_measure(0.0, 0.0) == 0.0


def test_image_metrics_all_at_once():
    m = image_metrics("RIVER bamk", 'a sign that says "river bank"')
    assert m == {
        "word_accuracy": 0.0,
        "accuracy": 0.0,
        "precision": 0.5,
        "recall": 0.5,
        "ned": pytest.approx(1 / 9),  # "riverbamk" vs "riverbank": one substitution in 9
        "ocr_reward": pytest.approx(8 / 9),
    }
    with pytest.raises(ValueError):
        image_metrics("x", "no quotes here")


def test_f_measure_comes_from_averaged_precision_and_recall():
    # per-image F values are both 2/3, but MARIO's F-measure uses the averages P = R = 0.75
    scores = [{"precision": 1.0, "recall": 0.5}, {"precision": 0.5, "recall": 1.0}]
    items = [EvalItem('a "x"', "one_word"), EvalItem('a "y"', "one_word")]
    by_task = {m.task: m for m in f_measure_metrics(scores, items)}
    assert by_task["one_word"].value == pytest.approx(0.75)
    assert by_task["overall"].value == pytest.approx(0.75)
    assert by_task["one_word"].n_images == 2 and by_task["one_word"].n_prompts == 2
    # delta method: grad = (0.5, 0.5), cov of (p, r) = [[.125, -.125], [-.125, .125]] / 2 -> variance 0
    assert by_task["one_word"].stderr == pytest.approx(0.0, abs=1e-12)


def test_overall_pools_every_image_as_mario_does():
    # 3 one-word images (all read) and 1 two-word image (nothing read): the mean of the task means would be
    # 0.5, MARIO's pool of all four images is 0.75 for recall and accuracy
    scores = [
        {"precision": 1.0, "recall": 1.0, "accuracy": 1.0},
        {"precision": 1.0, "recall": 1.0, "accuracy": 1.0},
        {"precision": 1.0, "recall": 1.0, "accuracy": 1.0},
        {"precision": 0.0, "recall": 0.0, "accuracy": 0.0},
    ]
    items = [EvalItem('a "a"', "one_word"), EvalItem('a "b"', "one_word"), EvalItem('a "c"', "one_word"), EvalItem('a "e f"', "two_words")]
    metrics = {(m.task, m.metric): m for m in OcrSuite().aggregate(scores, items)}
    assert metrics[("overall", "recall")].value == pytest.approx(0.75)
    assert metrics[("overall", "accuracy")].value == pytest.approx(0.75)
    assert metrics[("one_word", "recall")].value == 1.0 and metrics[("two_words", "recall")].value == 0.0
    assert metrics[("overall", "recall")].n_images == 4 and metrics[("overall", "recall")].n_prompts == 4
    # F from the pooled P = R = 0.75, not from the task means (0.5, 0.5)
    assert metrics[("overall", "f_measure")].value == pytest.approx(0.75)
    assert metrics[("two_words", "f_measure")].value == 0.0
    assert math.isfinite(metrics[("overall", "f_measure")].stderr) and metrics[("overall", "f_measure")].stderr > 0


def test_bench_ocr_metrics_script_runs_and_agrees(tmp_path, capsys):
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_ocr_metrics.py"
    spec = importlib.util.spec_from_file_location("bench_ocr_metrics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "ocr_metrics.json"
    result = module.main(["--pairs", "40", "--repeats", "1", "--out", str(out)])
    assert result["mismatches"] == 0 and result["pairs"] == 40
    assert json.loads(out.read_text()) == result
    assert json.loads(capsys.readouterr().out) == result

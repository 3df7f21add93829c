"""The `ocr` suite: registered, items with targets, real rapidocr scoring, MARIO aggregates."""

from __future__ import annotations

import pytest
import torch

from jsbench.suites import available_suites, load_suite
from jsbench.suites.ocr import TASKS, OcrSuite
from jsbench.world.text import _drawn, render_text, text_latent


@pytest.fixture(scope="module")
def suite() -> OcrSuite:
    return load_suite("ocr")


def test_registered_with_items_per_split(suite):
    assert "ocr" in available_suites()
    assert suite.name == "ocr" and suite.primary_metric == "word_accuracy"
    test, train = suite.items("test"), suite.items("train")
    assert len(test) == 40 and len(train) == 120
    assert {it.task for it in test} <= set(TASKS)
    for it in test:
        assert it.metadata["targets"] and " ".join(it.metadata["targets"]) in it.prompt.lower()
    assert suite.items("test") == test


def test_prompts_from_a_file(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text('a sign that says "hello"\na mug with the text "good morning"\n', encoding="utf-8")
    items = OcrSuite(prompts_file=str(path)).items("all")
    assert [it.task for it in items] == ["one_word", "two_words"]


def test_score_and_aggregate_with_real_ocr(suite):
    items = suite.items("test")[:6]
    good = [text_latent(_drawn(" ".join(it.metadata["targets"]), "upper")) for it in items[:4]]
    # two wrong images: a different word, and nothing at all
    bad = [text_latent("zebra"), text_latent("")]
    images = render_text(torch.stack(good + bad))
    scores = suite.score(images, items)
    assert [s["word_accuracy"] for s in scores] == [1, 1, 1, 1, 0, 0]
    assert scores[5] == {"word_accuracy": 0, "exact_match": 0, "precision": 0, "recall": 0, "ned": 1.0, "ocr_reward": 0}
    metrics = {(m.task, m.metric): m for m in suite.aggregate(scores, items)}
    overall = metrics[("overall", "word_accuracy")]
    tasks = [m for (t, k), m in metrics.items() if k == "word_accuracy" and t != "overall"]
    assert overall.value == pytest.approx(sum(m.value for m in tasks) / len(tasks))
    assert overall.n_images == 6 and overall.n_prompts == 6
    f1 = metrics[("overall", "f1")]
    p, r = metrics[("overall", "precision")].value, metrics[("overall", "recall")].value
    assert f1.value == pytest.approx(2 * p * r / (p + r))
    assert {k for _, k in metrics} == {"word_accuracy", "exact_match", "precision", "recall", "f1", "ned", "ocr_reward"}


def test_score_checks_lengths(suite):
    with pytest.raises(ValueError):
        suite.score(torch.zeros(2, 3, 64, 256), suite.items("test")[:3])

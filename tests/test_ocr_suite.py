"""The `ocr` suite: registered, items with targets, real rapidocr scoring, MARIO aggregates."""

from __future__ import annotations

import pytest
import torch

from jsbench.suites import available_suites, load_suite
from jsbench.suites.ocr import TASKS, OcrSuite
from jsbench.world.text import _drawn, text_latent
from jsbench.world.text_canvas import render_text


@pytest.fixture(scope="module")
def suite() -> OcrSuite:
    return load_suite("ocr")


def test_registered_with_items_per_split(suite):
    assert "ocr" in available_suites()
    assert suite.name == "ocr" and suite.primary_metric == "accuracy" and suite.protocol == "mario"
    test, train = suite.items("test"), suite.items("train")
    assert len(test) == 40 and len(train) == 120
    assert {it.task for it in test} <= set(TASKS)
    for it in test:
        assert it.metadata["targets"] and " ".join(it.metadata["targets"]) in it.prompt.lower()
    assert suite.items("test") == test


def test_prompts_from_a_file(tmp_path):
    path = tmp_path / "mine.txt"
    # MARIO-Eval's prompts quote with single quotes
    path.write_text('a sign that says "hello"\na mug with the text "good morning"\na poster that reads \'open late now\'\n', encoding="utf-8")
    items = OcrSuite(prompts_file=str(path)).items("all")
    assert [it.task for it in items] == ["one_word", "two_words", "many_words"]
    assert items[2].metadata["targets"] == ["open", "late", "now"]


@pytest.mark.parametrize("name", ["detail", "scenes-dit"])
def test_worlds_without_text_are_refused_in_one_line(name):
    from jsbench import JsbenchError
    from jsbench.backbones import backbone_class
    from jsbench.rewards import load_reward

    cls = backbone_class(name)  # the class says enough: no weights, no sampling
    for build in (lambda: load_suite("ocr", cls), lambda: load_reward("ocr", cls)):
        with pytest.raises(JsbenchError) as err:
            build()
        msg = str(err.value)
        assert "\n" not in msg and name in msg and "--backbone analytic" in msg
    load_suite("ocr", backbone_class("analytic"))  # the text world and text-to-image models are fine
    load_suite("ocr", backbone_class("sdxl"))


def test_score_and_aggregate_with_real_ocr():
    suite = OcrSuite(protocol="words")
    items = suite.items("test")[:6]
    good = [text_latent(_drawn(" ".join(it.metadata["targets"]), "upper")) for it in items[:4]]
    # two wrong images: a different word, and nothing at all
    bad = [text_latent("zebra"), text_latent("")]
    images = render_text(torch.stack(good + bad))
    scores = suite.score(images, items)
    assert [s["word_accuracy"] for s in scores] == [1, 1, 1, 1, 0, 0]
    assert scores[5] == {"word_accuracy": 0, "accuracy": 0, "precision": 0, "recall": 0, "ned": 1.0, "ocr_reward": 0}
    metrics = {(m.task, m.metric): m for m in suite.aggregate(scores, items)}
    overall = metrics[("overall", "word_accuracy")]
    assert overall.value == pytest.approx(4 / 6)  # pooled over every image, as MARIO-Eval pools
    assert overall.n_images == 6 and overall.n_prompts == 6
    f = metrics[("overall", "f_measure")]
    p, r = metrics[("overall", "precision")].value, metrics[("overall", "recall")].value
    assert f.value == pytest.approx(2 * p * r / (p + r))
    assert {k for _, k in metrics} == {"word_accuracy", "accuracy", "precision", "recall", "f_measure", "ned", "ocr_reward"}


def test_mario_scores_real_ocr_of_one_word_drawn_right_and_wrong(suite):
    items = [it for it in suite.items("test") if it.task == "one_word"][:3]
    good = [text_latent(_drawn(it.metadata["targets"][0], "upper")) for it in items[:2]]
    images = render_text(torch.stack(good + [text_latent("zebra")]))
    scores = suite.score(images, items)
    assert [s["accuracy"] for s in scores] == [1.0, 1.0, 0.0]
    metrics = {(m.task, m.metric): m for m in suite.aggregate(scores, items)}
    assert metrics[("overall", "accuracy")].value == pytest.approx(2 / 3)
    assert {k for _, k in metrics} == {"accuracy", "precision", "recall", "f_measure"}


def test_score_checks_lengths(suite):
    with pytest.raises(ValueError):
        suite.score(torch.zeros(2, 3, 64, 256), suite.items("test")[:3])


@pytest.mark.parametrize("command", ["eval", "compare"])
@pytest.mark.parametrize("backbone", ["detail", "scenes-dit"])
def test_cli_refuses_ocr_on_worlds_without_text_before_loading(cli, command, backbone, monkeypatch):
    import jsbench.backbones as backbones

    def no_loading(*args, **kwargs):
        raise AssertionError("the backbone was loaded before the refusal")

    monkeypatch.setattr(backbones, "load_backbone", no_loading)
    code, out, err = cli(command, "--suite", "ocr", "--backbone", backbone, "--steps", "3", "--seeds", "1", "--no-progress")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and backbone in err and "--backbone analytic" in err


def test_overall_se_is_clustered_by_prompt(suite):
    """Two images of each prompt read alike: the pooled `overall` and F count prompts, not images, so
    their SEs are those of four prompt means, larger than the i.i.d. ones of eight images."""
    import math

    from jsbench.stats import cluster_mean, naive_mean

    prompts = suite.items("test")[:4]
    items = [it for it in prompts for _ in range(2)]
    read = [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    precision = [1.0, 1.0, 0.5, 0.5, 1.0, 1.0, 0.0, 0.0]
    scores = [{"word_accuracy": w, "precision": p, "recall": w} for w, p in zip(read, precision)]
    metrics = {(m.task, m.metric): m for m in suite.aggregate(scores, items)}
    overall = metrics[("overall", "word_accuracy")]
    naive = naive_mean(read)
    assert overall.value == 0.5 and overall.stderr == pytest.approx(cluster_mean(read, [it.prompt for it in items]).stderr)
    assert overall.stderr == pytest.approx(math.sqrt(1 / 3 / 4))  # the SE of the four prompt means 1, 0, 1, 0
    assert overall.stderr > naive.stderr and overall.df == 3
    f = metrics[("overall", "f_measure")]
    # the i.i.d. delta method: grad' cov(p, r) / n grad over the eight images
    import numpy as np

    pr = np.array([precision, read]).T
    p, r = pr.mean(0)
    grad = np.array([2 * r * r, 2 * p * p]) / (p + r) ** 2
    iid = math.sqrt(float(grad @ (np.cov(pr.T) / len(pr)) @ grad))
    assert f.stderr > iid and f.df == 3

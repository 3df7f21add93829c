"""Scorer agreement: kappa and tau on hand-worked cases, and the same images scored by two OCR engines
and by two GenEval detectors (test-sized, on the CPU)."""

from __future__ import annotations

import math

import pytest
import torch

from jsbench import JsbenchError
from jsbench.analysis.agreement import agreement, cohens_kappa, discordant_pairs, kendall_tau, sample_rows, score_rows


def test_cohens_kappa_by_hand():
    # observed 0.75; chance (0.5 * 0.25) + (0.5 * 0.75) = 0.5 -> (0.75 - 0.5) / 0.5
    assert cohens_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    assert cohens_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert cohens_kappa([1, 1, 1], [1, 1, 1]) == 1.0  # one label everywhere: nothing to disagree on
    assert math.isnan(cohens_kappa([], []))
    with pytest.raises(ValueError):
        cohens_kappa([1], [1, 0])


def test_kendall_tau_and_discordant_pairs():
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau([1, 2, 3], [1, 1, 3]) == pytest.approx(2 / 3)  # the tied pair counts as neither
    assert discordant_pairs([1, 1, 3], [1, 2, 3]) == 0  # a tie under one scorer is no change of ranking
    assert discordant_pairs([1, 2, 3], [2, 1, 3]) == 1


def test_agreement_table():
    verdicts = {
        "a": {"r1": [1, 1, 0, 0], "r2": [1, 1, 1, 0]},
        "b": {"r1": [1, 1, 1, 1], "r2": [1, 0, 0, 0]},
        "c": {"r1": [1, 1, 0, 0], "r2": [1, 1, 1, 1]},
    }
    table = agreement(verdicts, "correct")
    pairs = {(p.a, p.b): p for p in table.pairs}
    assert table.means["a"] == {"r1": 0.5, "r2": 0.75}
    ab = pairs[("a", "b")]
    assert ab.n_images == 8 and ab.agreement == pytest.approx(4 / 8) and ab.ranking_changed and ab.kendall_tau == -1.0
    assert not pairs[("a", "c")].ranking_changed and pairs[("a", "c")].agreement == pytest.approx(7 / 8)
    assert "| a vs b | 8 | 0.500 |" in table.markdown()
    with pytest.raises(JsbenchError):
        agreement({"a": verdicts["a"]}, "correct")
    with pytest.raises(JsbenchError):
        agreement({"a": verdicts["a"], "b": {"r1": [1], "r2": [1]}}, "correct")


def test_two_ocr_engines_on_identical_images():
    from jsbench.backbones import load_backbone
    from jsbench.evaluation.evaluate import resolve_schedule
    from jsbench.suites import load_suite

    bb = load_backbone("analytic")
    engines = {name: load_suite("ocr", bb, engine=name) for name in ("rapidocr", "tesseract")}
    suite = engines["rapidocr"]
    items = suite.items("test")[:3]
    sources = {s: resolve_schedule(s, bb, 3, suite=suite) for s in ("default", "ceiling")}
    images = sample_rows(bb, sources, items, [0])
    assert set(images) == {"default", "ceiling"} and images["ceiling"].shape[0] == 3
    verdicts = score_rows(engines, images, items, [0], "accuracy")
    # the ceiling's images are clean text and both engines read every word, but MARIO takes each detection
    # as one token: rapidocr detects "river" and "dream" apart, tesseract one line "river dream" (accuracy 0)
    assert [it.metadata["targets"] for it in items] == [["river", "dream"], ["forest"], ["gold"]]
    assert verdicts["rapidocr"]["ceiling"] == [1.0, 1.0, 1.0] and verdicts["tesseract"]["ceiling"] == [0.0, 1.0, 1.0]
    table = agreement(verdicts, "accuracy")
    assert table.pairs[0].n_images == 6 and 0.0 <= table.pairs[0].agreement <= 1.0
    with pytest.raises(JsbenchError, match="gives no"):
        score_rows(engines, images, items, [0], "correct")


def test_two_geneval_detectors_on_identical_images(tmp_path):
    from test_geneval_real import REAL, _tiny_owl, oracle_classifier

    from jsbench.suites import load_suite

    owl = _tiny_owl(tmp_path)
    strict = _tiny_owl(tmp_path)
    strict.min_score = 0.55  # another detector: the same network, a stricter threshold
    scorers = {name: load_suite("geneval", REAL, detector=d, color_classifier=oracle_classifier()) for name, d in (("owl", owl), ("owl-strict", strict))}
    test = scorers["owl"].items("test")
    items = [next(it for it in test if it.task == t) for t in ("single_object", "counting")]
    torch.manual_seed(0)
    images = {"r1": torch.rand(2, 3, 32, 32), "r2": torch.rand(2, 3, 32, 32)}
    verdicts = score_rows(scorers, images, items, [0], "correct")
    table = agreement(verdicts, "correct")
    assert table.pairs[0].n_images == 4 and all(v in (0.0, 1.0) for r in verdicts["owl"].values() for v in r)

"""The `hpdv2` suite: prompts from a local benchmark folder, clear errors, HPS scoring and aggregates."""

from __future__ import annotations

import json

import pytest
import torch

from jsbench import JsbenchError
from jsbench.rewards.clip import ClipModel, HpsReward
from jsbench.suites import available_suites, load_suite
from jsbench.suites.hpdv2 import FALLBACK_PROTOCOL, PAPER_PROTOCOL, STYLES, load_hpdv2_prompts


@pytest.fixture
def bench(tmp_path):
    folder = tmp_path / "HPDv2" / "benchmark"
    folder.mkdir(parents=True)
    for style in STYLES:
        (folder / f"{style}.json").write_text(json.dumps([f"{style} prompt {i}" for i in range(8)]))
    return tmp_path / "HPDv2"


class ConstClip(torch.nn.Module):
    """Image feature = mean RGB; text feature = (1, 0, 0) for 'anime' prompts, else (0, 1, 0)."""

    def encode_image(self, x):
        return x.mean((-1, -2))

    def encode_text(self, tokens):
        return torch.stack([torch.tensor([1.0, 0.0, 0.0]) if t[0] == 1 else torch.tensor([0.0, 1.0, 0.0]) for t in tokens])


def test_prompts_from_folder_and_splits(bench, monkeypatch):
    assert "hpdv2" in available_suites()
    prompts = load_hpdv2_prompts(str(bench))  # files under benchmark/
    assert list(prompts) == list(STYLES) and all(len(v) == 8 for v in prompts.values())
    monkeypatch.setenv("JSBENCH_HPDV2_DIR", str(bench / "benchmark"))  # files directly
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(bench / "hub"))  # no training set anywhere: the fallback split
    suite = load_suite("hpdv2")
    assert suite.protocol == FALLBACK_PROTOCOL
    test, train, everything = suite.items("test"), suite.items("train"), suite.items("all")
    assert len(everything) == 32 and len(test) == 8 and len(train) == 24
    assert {it.task for it in test} == set(STYLES)
    assert not {it.prompt for it in test} & {it.prompt for it in train}


def test_missing_prompts_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.delenv("JSBENCH_HPDV2_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(JsbenchError) as err:
        load_suite("hpdv2")
    assert "\n" not in str(err.value) and "zhwang/HPDv2" in str(err.value) and "JSBENCH_HPDV2_DIR" in str(err.value)
    (tmp_path / "anime.json").write_text("{not json")
    with pytest.raises(JsbenchError, match="anime.json"):
        load_hpdv2_prompts(str(tmp_path))


def test_score_and_aggregate_with_hps(bench):
    tok = lambda texts: torch.tensor([[1 if t.startswith("anime") else 2] for t in texts])  # noqa: E731
    clip = ClipModel(ConstClip(), tok, image_size=8, mean=(0, 0, 0), std=(1, 1, 1), device="cpu")
    suite = load_suite("hpdv2", prompts_dir=str(bench), reward=HpsReward(model=clip))
    items = [it for it in suite.items("all") if it.task in ("anime", "photo")][::4]
    red = torch.zeros(len(items), 3, 8, 8)
    red[:, 0] = 1.0
    scores = suite.score(red, items)
    for s, it in zip(scores, items):
        assert s["hps"] == pytest.approx(100.0 if it.task == "anime" else 0.0, abs=1e-3)
    metrics = {(m.task, m.metric): m for m in suite.aggregate(scores, items)}
    assert metrics[("anime", "hps")].value == pytest.approx(100.0, abs=1e-3)
    assert metrics[("overall", "hps")].value == pytest.approx(50.0, abs=1e-3)


def test_papers_protocol_with_the_training_set(bench, monkeypatch):
    # train.json beside benchmark/: evaluation on every benchmark prompt, training on the training set's prompts
    entries = [{"prompt": f"train prompt {i % 5}", "image_path": ["a.png", "b.png"]} for i in range(9)]
    (bench / "train.json").write_text(json.dumps(entries))
    suite = load_suite("hpdv2", prompts_dir=str(bench))
    assert suite.protocol == PAPER_PROTOCOL
    assert suite.items("test") == suite.items("all") and len(suite.items("test")) == 32
    train = suite.items("train")
    assert [it.prompt for it in train] == [f"train prompt {i}" for i in range(5)]  # distinct, in order
    assert not {it.prompt for it in train} & {it.prompt for it in suite.items("test")}


def test_hpsv2_packages_benchmark_folder_is_found(tmp_path, bench, monkeypatch):
    monkeypatch.delenv("JSBENCH_HPDV2_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    root = tmp_path / "hpsroot"
    (root / "datasets").mkdir(parents=True)
    (bench / "benchmark").rename(root / "datasets" / "benchmark")
    monkeypatch.setenv("HPS_ROOT", str(root))
    assert all(len(v) == 8 for v in load_hpdv2_prompts().values())


def test_missing_hps_weights_refused_before_sampling(bench, tmp_path, monkeypatch):
    from jsbench.suites import preflight

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("JSBENCH_HPS_CHECKPOINT", raising=False)
    monkeypatch.setenv("JSBENCH_HPDV2_DIR", str(bench))
    suite = load_suite("hpdv2")
    assert len(suite.items("test")) == 8  # listing prompts needs no weights
    for check in (suite.provenance, lambda: preflight("hpdv2")):  # evaluation reads provenance before sampling
        with pytest.raises(JsbenchError) as err:
            check()
        assert "\n" not in str(err.value) and "HPS_v2.1_compressed.pt" in str(err.value) and "hf download" in str(err.value)
    (tmp_path / "hps.pt").write_bytes(b"")
    monkeypatch.setenv("JSBENCH_HPS_CHECKPOINT", str(tmp_path / "hps.pt"))
    preflight("hpdv2")
    assert suite.provenance()["protocol"] == "benchmark-split"

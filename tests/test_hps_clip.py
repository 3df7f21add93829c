"""HPSv2 / CLIP-score rewards: the score formula, batching and caching on tiny CLIP-like models.

The `ClipModel` machinery is tested on a tiny random torch stand-in (encode_image / encode_text), which
runs everywhere; the open_clip paths run on a tiny random open_clip model (`pretrained=None`) only
where open_clip imports (it hard-requires torchvision, which has no wheel for this torch build).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from jsbench import JsbenchError
from jsbench.rewards import available_rewards, load_reward
from jsbench.rewards.clip import ClipModel, ClipScoreReward, HpsReward, _ClipReward, open_clip_available, resolve_hps_checkpoint

OPEN_CLIP, WHY = open_clip_available()


class TinyClip(torch.nn.Module):
    def __init__(self, dim: int = 8, vocab: int = 64):
        super().__init__()
        torch.manual_seed(0)
        self.visual = torch.nn.Linear(3 * 16, dim)
        self.text = torch.nn.EmbeddingBag(vocab, dim)

    def encode_image(self, x):
        return self.visual(F.adaptive_avg_pool2d(x, 4).flatten(1))

    def encode_text(self, tokens):
        return self.text(tokens)


def tokenize(texts):
    return torch.tensor([[sum(map(ord, w)) % 64 for w in (t.split() + ["<pad>"] * 6)[:6]] for t in texts])


@pytest.fixture
def clip():
    return ClipModel(TinyClip(), tokenize, image_size=16, device="cpu")


def test_registered():
    assert {"hps", "clip"} <= set(available_rewards())
    assert load_reward("hps").name == "hps" and load_reward("clip").name == "clip"


def test_score_formula_is_100_cosine(clip):
    torch.manual_seed(1)
    images = torch.rand(3, 3, 20, 24)
    prompts = ["a red cat", "two dogs", "a tv"]
    got = HpsReward(model=clip)(images, prompts)
    img = clip.model.encode_image(clip.preprocess(images))
    txt = clip.model.encode_text(tokenize(prompts))
    expected = 100 * F.cosine_similarity(img, txt, dim=-1)
    torch.testing.assert_close(got, expected.detach(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ClipScoreReward(model=clip)(images, prompts), expected.detach().clamp_min(0), rtol=1e-5, atol=1e-4)


def test_preprocess_short_side_and_centre_crop(clip):
    x = torch.rand(2, 3, 16, 32)
    out = clip.preprocess(x)
    assert out.shape == (2, 3, 16, 16)
    torch.testing.assert_close(out, (x[..., 8:24] - clip.mean) / clip.std)


def test_batched_equals_one_by_one(clip):
    torch.manual_seed(2)
    images = torch.rand(5, 3, 16, 16)
    prompts = [f"prompt {i}" for i in range(5)]
    reward = HpsReward(model=clip, batch_size=2)
    batched = reward(images, prompts)
    single = torch.cat([reward(images[i : i + 1], prompts[i : i + 1]) for i in range(5)])
    torch.testing.assert_close(batched, single, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError):
        reward(images, prompts[:2])


def test_model_loaded_once_and_texts_encoded_once(clip, monkeypatch):
    loads = []

    def loader():
        loads.append(1)
        return clip

    reward = _ClipReward(loader)
    calls = []
    original = clip.model.encode_text
    monkeypatch.setattr(clip.model, "encode_text", lambda t: calls.append(len(t)) or original(t))
    for _ in range(3):
        reward(torch.rand(2, 3, 16, 16), ["a", "b"])
    assert len(loads) == 1 and calls == [2]


def test_hps_checkpoint_missing_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("JSBENCH_HPS_CHECKPOINT", raising=False)
    with pytest.raises(JsbenchError) as err:
        resolve_hps_checkpoint()
    msg = str(err.value)
    assert "\n" not in msg and "xswu/HPSv2" in msg and "hf download" in msg
    with pytest.raises(JsbenchError, match="not found"):
        resolve_hps_checkpoint(str(tmp_path / "nope.pt"))


@pytest.mark.skipif(OPEN_CLIP, reason="open_clip is importable here")
def test_without_open_clip_the_reward_names_the_extra():
    with pytest.raises(JsbenchError, match=r"jsbench\[rewards\]"):
        ClipScoreReward("ViT-B-32:openai")(torch.rand(1, 3, 8, 8), ["x"])


TINY_OPEN_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 16, "heads": 1, "layers": 1},
}


@pytest.mark.skipif(not OPEN_CLIP, reason=f"open_clip not importable here: {WHY}")
def test_tiny_open_clip_batching_caching_formula(tmp_path):
    import open_clip

    from jsbench.rewards import clip as clipmod

    open_clip.factory._MODEL_CONFIGS["jsbench-tiny"] = TINY_OPEN_CLIP
    m1 = clipmod.load_open_clip("jsbench-tiny", None, device="cpu")
    assert clipmod.load_open_clip("jsbench-tiny", None, device="cpu") is m1
    images, prompts = torch.rand(3, 3, 40, 32), ["a cat", "a dog", "a bus"]
    reward = HpsReward(model=m1, batch_size=2)
    batched = reward(images, prompts)
    single = torch.cat([reward(images[i : i + 1], prompts[i : i + 1]) for i in range(3)])
    torch.testing.assert_close(batched, single, rtol=1e-4, atol=1e-3)
    with torch.no_grad():
        img = m1.model.encode_image(m1.preprocess(images))
        txt = m1.model.encode_text(m1.tokenizer(prompts))
    torch.testing.assert_close(batched, 100 * F.cosine_similarity(img, txt, dim=-1), rtol=1e-4, atol=1e-3)

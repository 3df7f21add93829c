"""HPSv2 / CLIP-score rewards: the score formula, batching and caching on tiny CLIP-like models.

The `ClipModel` machinery is tested on a tiny random torch stand-in (encode_image / encode_text), which
runs everywhere; the open_clip paths run on a tiny random open_clip model (`pretrained=None`) only
where open_clip imports (it hard-requires torchvision, which has no wheel for this torch build).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from jsbench import JsbenchError
from jsbench.rewards import available_rewards, load_reward
from jsbench.rewards import clip as clipmod
from jsbench.rewards.clip import (
    ClipModel,
    ClipScoreReward,
    HpsReward,
    _ClipReward,
    as_hps,
    hps_version,
    open_clip_available,
    resize_pad,
    resolve_hps_checkpoint,
)

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


def test_registered(tmp_path, monkeypatch):
    assert {"hps", "clip"} <= set(available_rewards())
    assert load_reward("clip").name == "clip"
    # the hps reward finds its checkpoint when built (no weights load), and refuses in one line without it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("JSBENCH_HPS_CHECKPOINT", raising=False)
    with pytest.raises(JsbenchError) as err:
        load_reward("hps")
    assert "\n" not in str(err.value) and "xswu/HPSv2" in str(err.value)
    (tmp_path / "hps.pt").write_bytes(b"")
    monkeypatch.setenv("JSBENCH_HPS_CHECKPOINT", str(tmp_path / "hps.pt"))
    assert load_reward("hps").name == "hps"


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


# --------------------------------------------------------------- hpsv2's preprocessing (ResizeMaxSize)

# non-square shapes: downscaled both ways, upscaled, odd padding, a long side already at 224, and
# 448 x 301 whose short side lands on an exact tie (150.5), which Python's round (hpsv2's) takes to 150
NON_SQUARE = [(512, 768), (1024, 576), (48, 32), (301, 101), (100, 224), (448, 301)]


def pil_resize_max_size(image: torch.Tensor, size: int) -> torch.Tensor:
    """An independent ResizeMaxSize: PIL's float ("F" mode) bicubic per channel, numpy zero padding."""
    from PIL import Image

    c, h, w = image.shape
    scale = size / float(max(h, w))
    nh, nw = round(h * scale), round(w * scale)
    out = np.zeros((c, size, size), np.float32)
    top, left = (size - nh) // 2, (size - nw) // 2
    for k in range(c):
        channel = Image.fromarray(image[k].numpy().astype(np.float32), mode="F")
        if (nh, nw) != (h, w):
            channel = channel.resize((nw, nh), Image.BICUBIC)
        out[k, top : top + nh, left : left + nw] = np.asarray(channel)
    return torch.from_numpy(out)


@pytest.mark.parametrize("shape", NON_SQUARE)
def test_resize_pad_matches_an_independent_pil_implementation(shape):
    torch.manual_seed(3)
    x = torch.rand(1, 3, *shape)
    got = resize_pad(x, 224)[0]
    torch.testing.assert_close(got, pil_resize_max_size(x[0], 224), rtol=0, atol=2e-5)


def test_resize_pad_geometry():
    x = torch.ones(1, 3, 448, 301)
    out = resize_pad(x, 224)[0, 0]
    cols = out.abs().sum(0) > 0
    assert out.shape == (224, 224) and int(cols.sum()) == 150  # round(150.5) = 150, as Python's round
    assert not cols[:37].any() and cols[37:187].all() and not cols[187:].any()  # 74 pad columns: 37 left, 37 right
    tall = resize_pad(torch.ones(1, 3, 90, 30), 224)[0, 0]
    rows, cols = tall.abs().sum(1) > 0, tall.abs().sum(0) > 0
    assert rows.all() and int(cols.sum()) == 75 and not cols[:74].any() and cols[74:149].all()  # 149 pad: 74 | 75


def test_hps_preprocessing_pads_black_and_differs_from_the_crop(clip):
    hps = as_hps(clip)
    assert hps.model is clip.model and hps.resize == "pad" and hps.quantize
    assert hps.autocast_dtype is None  # CPU: hpsv2's autocast is a CUDA one
    x = torch.rand(1, 3, 16, 32)
    out = hps.preprocess(x)
    assert out.shape == (1, 3, 16, 16)
    black = ((0 - clip.mean) / clip.std).expand(1, 3, 4, 16)
    torch.testing.assert_close(out[..., :4, :], black)  # 16 x 32 -> 8 x 16, 4 rows of zeros above and below
    torch.testing.assert_close(out[..., 12:, :], black)
    inner = torch.nn.functional.interpolate(clipmod.quantize_8bit(x), size=(8, 16), mode="bicubic", antialias=True)
    torch.testing.assert_close(out[..., 4:12, :], (inner - clip.mean) / clip.std)
    assert not torch.allclose(out, clip.preprocess(x))
    # square images: the two agree up to the 8-bit rounding
    sq = torch.rand(1, 3, 32, 32)
    torch.testing.assert_close(hps.preprocess(sq), clip.preprocess(clipmod.quantize_8bit(sq)), rtol=0, atol=2e-4)


def test_hps_reward_scores_the_padded_image(clip):
    hps = as_hps(clip)
    images, prompts = torch.rand(2, 3, 16, 40), ["a cat", "a dog"]
    got = HpsReward(model=hps)(images, prompts)
    img = clip.model.encode_image(hps.preprocess(images))
    expected = 100 * F.cosine_similarity(img, clip.model.encode_text(tokenize(prompts)), dim=-1)
    torch.testing.assert_close(got, expected.detach(), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="float32"):
        as_hps(ClipModel(TinyClip(), tokenize, 16, device="cpu", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="preprocessing"):
        ClipModel(TinyClip(), tokenize, 16, device="cpu", resize="stretch")


def test_hps_versions_select_the_checkpoint(monkeypatch):
    monkeypatch.delenv("JSBENCH_HPS_VERSION", raising=False)
    monkeypatch.delenv("JSBENCH_HPS_CHECKPOINT", raising=False)
    assert hps_version() == "v2.1" and hps_version("v2") == "v2.0" and hps_version("2.1") == "v2.1"
    monkeypatch.setenv("JSBENCH_HPS_VERSION", "v2.0")
    assert hps_version() == "v2.0" and HpsReward().version == "v2.0"
    assert HpsReward().id == "hps-v2.0:xswu/HPSv2" and HpsReward(version="v2.1").id == "hps-v2.1:xswu/HPSv2"
    with pytest.raises(JsbenchError, match="unknown HPS version 'v3'"):
        hps_version("v3")
    asked = []
    monkeypatch.setattr(clipmod, "_hub_file", lambda repo, name, what: asked.append((repo, name)) or f"/cache/{name}")
    assert resolve_hps_checkpoint(version="v2.1") == "/cache/HPS_v2.1_compressed.pt"
    assert resolve_hps_checkpoint() == "/cache/HPS_v2_compressed.pt"  # $JSBENCH_HPS_VERSION
    assert asked == [("xswu/HPSv2", "HPS_v2.1_compressed.pt"), ("xswu/HPSv2", "HPS_v2_compressed.pt")]


@pytest.mark.skipif(not OPEN_CLIP, reason=f"open_clip not importable here: {WHY}")
@pytest.mark.parametrize("shape", [(512, 768), (301, 101)])
def test_hps_preprocessing_equals_hpsv2s_torchvision_transform(shape):
    """hpsv2's validation transform, rebuilt from torchvision calls (ToTensor, resize, pad, Normalize) on a PIL image."""
    import torchvision.transforms.functional as TF
    from PIL import Image

    torch.manual_seed(4)
    x = torch.rand(1, 3, *shape)
    pil = Image.fromarray((x[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8))
    t = TF.to_tensor(pil)
    h, w = t.shape[1:]
    scale = 224 / float(max(h, w))
    nh, nw = round(h * scale), round(w * scale)
    t = TF.resize(t, [nh, nw], TF.InterpolationMode.BICUBIC)
    pad_h, pad_w = 224 - nh, 224 - nw
    t = TF.pad(t, [pad_w // 2, pad_h // 2, pad_w - pad_w // 2, pad_h - pad_h // 2], fill=0)
    t = TF.normalize(t, clipmod.OPENAI_MEAN, clipmod.OPENAI_STD)
    hps = as_hps(ClipModel(TinyClip(), tokenize, 224, device="cpu"))
    torch.testing.assert_close(hps.preprocess(x)[0], t, rtol=0, atol=1e-5)


@pytest.mark.skipif(not OPEN_CLIP, reason=f"open_clip not importable here: {WHY}")
def test_tiny_open_clip_hps_checkpoint_path(tmp_path, monkeypatch):
    """load_hps end to end on a tiny open_clip: a checkpoint saved as hpsv2 saves it, loaded and run as hpsv2 runs it."""
    import open_clip

    open_clip.factory._MODEL_CONFIGS["jsbench-tiny"] = TINY_OPEN_CLIP
    torch.manual_seed(5)
    source = open_clip.create_model("jsbench-tiny")
    ckpt = tmp_path / "HPS_tiny.pt"
    torch.save({"state_dict": {f"module.{k}": v for k, v in source.state_dict().items()}}, ckpt)
    monkeypatch.setattr(clipmod, "HPS_ARCH", "jsbench-tiny")
    hps = clipmod.load_hps(str(ckpt), "v2.0", device="cpu")
    assert clipmod.load_hps(str(ckpt), "v2.0", device="cpu") is hps
    assert hps.resize == "pad" and hps.dtype == torch.float32 and hps.image_size == 32
    images, prompts = torch.rand(2, 3, 48, 20), ["a cat", "a dog"]
    got = HpsReward(model=hps)(images, prompts)
    source.eval()
    with torch.no_grad():
        pixels = torch.stack([pil_resize_max_size(clipmod.quantize_8bit(im), 32) for im in images])
        pixels = (pixels - hps.mean) / hps.std
        img = source.encode_image(pixels)
        txt = source.encode_text(open_clip.get_tokenizer("jsbench-tiny")(prompts))
    torch.testing.assert_close(got, 100 * F.cosine_similarity(img, txt, dim=-1), rtol=1e-4, atol=1e-3)

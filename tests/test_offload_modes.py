"""--offload-mode text / model / sequential (issue 23), on the tiny Flux-Dev pipeline on the CPU."""

from __future__ import annotations

import pytest
import torch

from jsbench import JsbenchError
from jsbench.backbones import load_backbone
from jsbench.backbones._diffusers import text_encoders
from jsbench.backbones.tiny import save_tiny_pipeline

PROMPTS = ["a red cat", "two blue dogs next to a car", "a red cat"]


@pytest.fixture(scope="module")
def flux_dir(tmp_path_factory):
    return save_tiny_pipeline("flux-dev", tmp_path_factory.mktemp("offload") / "flux-dev")


def test_text_offload_encodes_each_prompt_once_and_samples_the_same(flux_dir, monkeypatch):
    plain = load_backbone("flux-dev", str(flux_dir), device="cpu")
    text = load_backbone("flux-dev", str(flux_dir), device="cpu", offload="text")
    assert text.offload == "text"
    calls = []
    encode_prompts = type(text)._encode_prompts
    monkeypatch.setattr(type(text), "_encode_prompts", lambda self, p: calls.append(list(p)) or encode_prompts(self, p))
    cond = text.encode(PROMPTS)
    assert calls == [["a red cat", "two blue dogs next to a car"]]  # each distinct prompt once
    again = text.encode(["two blue dogs next to a car", "a red cat"])
    assert len(calls) == 1 and again.prompts == ["two blue dogs next to a car", "a red cat"]
    ref = plain.encode(PROMPTS)
    for key in ref.tensors:
        assert torch.allclose(cond.tensors[key], ref.tensors[key], atol=1e-6), key
    assert torch.allclose(cond.pooled, ref.pooled, atol=1e-6)
    x = plain.initial_noise([0, 1, 2])
    sig = plain.default_sigmas(3, x)
    assert torch.allclose(text.sample(x, cond, sig), plain.sample(x, ref, sig), atol=1e-5)


def test_model_offload_hooks_are_set_up_once(flux_dir, monkeypatch):
    pytest.importorskip("accelerate")
    bb = load_backbone("flux-dev", str(flux_dir), device="cpu", offload=True, decode_chunk=1)
    assert bb.offload == "model" and bb.pipe._all_hooks
    calls = []
    monkeypatch.setattr(type(bb.pipe), "enable_model_cpu_offload", lambda self, *a, **k: calls.append(1))
    x = bb.initial_noise([0, 1])
    cond = bb.encode(PROMPTS[:2])
    for _ in range(2):  # two sampler chunks
        bb.sample(x, cond, bb.default_sigmas(2, x))
    assert calls == []  # not re-installed per chunk (maybe_free_model_hooks would)


def test_sequential_offload_and_unknown_modes(flux_dir):
    pytest.importorskip("accelerate")
    with pytest.raises(JsbenchError, match="unknown --offload-mode 'layers'"):
        load_backbone("flux-dev", str(flux_dir), device="cpu", offload="layers")
    try:
        bb = load_backbone("flux-dev", str(flux_dir), device="cpu", offload="sequential")
    except JsbenchError as exc:  # diffusers may refuse to offload to the CPU itself: one line, named
        assert "--offload-mode sequential failed" in str(exc) and "\n" not in str(exc)
        return
    assert bb.offload == "sequential"
    x = bb.initial_noise([0])
    try:
        cond = bb.encode(PROMPTS[:1])
    except TypeError as exc:  # accelerate 1.16's hooks vs transformers 5's parameters, in this environment
        if "requires_grad" not in str(exc):
            raise
        pytest.skip(f"accelerate's sequential hooks cannot move transformers' parameters here: {str(exc).splitlines()[0][:80]}")
    assert torch.isfinite(bb.sample(x, cond, bb.default_sigmas(2, x))).all()


def test_text_encoders_stay_on_the_cpu_under_text_offload(flux_dir):
    bb = load_backbone("flux-dev", str(flux_dir), device="cpu", offload="text")
    assert len(text_encoders(bb.pipe)) == 2
    bb.encode(PROMPTS)
    assert all(p.device.type == "cpu" for m in text_encoders(bb.pipe) for p in m.parameters())


def test_distilled_row_shares_identical_components(flux_dir, tmp_path):
    """compare's distilled Flux-Schnell takes the main Flux-Dev pipeline's text encoders, tokenizers and VAE
    when their files are identical (FLUX.1's are), instead of holding a second copy; different files are not shared."""
    import shutil

    schnell_dir = save_tiny_pipeline("flux-schnell", tmp_path / "schnell")
    same_dir = tmp_path / "schnell-same-encoders"
    shutil.copytree(schnell_dir, same_dir)
    for name in ("text_encoder", "text_encoder_2", "vae"):
        shutil.rmtree(same_dir / name)
        shutil.copytree(flux_dir / name, same_dir / name)
    dev = load_backbone("flux-dev", str(flux_dir), device="cpu")
    shared = load_backbone("flux-schnell", str(same_dir), device="cpu", share_with=dev)
    assert {"text_encoder", "text_encoder_2", "vae"} <= set(shared.shared)
    assert shared.pipe.text_encoder_2 is dev.pipe.text_encoder_2 and shared.pipe.vae is dev.pipe.vae
    alone = load_backbone("flux-schnell", str(same_dir), device="cpu")
    x = alone.initial_noise([0, 1])
    sig = alone.default_sigmas(4, x)
    assert torch.equal(shared.sample(x, shared.encode(PROMPTS[:2]), sig), alone.sample(x, alone.encode(PROMPTS[:2]), sig))
    other = load_backbone("flux-schnell", str(schnell_dir), device="cpu", share_with=dev)
    assert not {"text_encoder", "text_encoder_2", "vae"} & set(other.shared)
    assert other.pipe.vae is not dev.pipe.vae

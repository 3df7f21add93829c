"""GenEval's mmdet Mask2Former weights on transformers, checked against real mmdet without mmdet.

tests/fixtures/mmdet/ was written once by scripts/mmdet_fixtures.py under mmdet 2.27.0 / mmcv-full 1.7.2
(scripts/make_mmdet_fixtures.sh): a reduced-size model of GenEval's architecture with random weights in
mmdet's key names, its float64 raw outputs, and `inference_detector`'s final detections on three images.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from jsbench import JsbenchError
from jsbench.rewards import mmdet_convert as mc

FIXTURES = Path(__file__).parent / "fixtures" / "mmdet"
CHECKPOINT = FIXTURES / "mask2former_reduced_mmdet2.pth"
MEAN = torch.tensor([123.675, 116.28, 103.53], dtype=torch.float64).view(1, 3, 1, 1)
STD = torch.tensor([58.395, 57.12, 57.375], dtype=torch.float64).view(1, 3, 1, 1)
RAW_TOL = 1e-5  # float64 agreement (measured 3e-7 on logits up to 32); each deliberate mistake below moves them far more


def _picture(name: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(FIXTURES / name).convert("RGB"))


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    return mc.convert_mmdet_checkpoint(CHECKPOINT, tmp_path_factory.mktemp("converted") / "m2f")


def _model(folder: Path, dtype=torch.float64):
    from transformers import Mask2FormerForUniversalSegmentation

    return Mask2FormerForUniversalSegmentation.from_pretrained(folder).to(dtype).eval()


def _raw(model) -> dict[str, torch.Tensor]:
    x = (torch.from_numpy(_picture("raw_input.png").copy()).permute(2, 0, 1)[None].double() - MEAN) / STD
    with torch.no_grad():
        out = model(pixel_values=x.to(next(model.parameters()).dtype), output_auxiliary_logits=True)
    first = out.auxiliary_logits[0]
    return {"class_logits": out.class_queries_logits[0], "mask_logits": out.masks_queries_logits[0],
            "class_logits_layer0": first["class_queries_logits"][0]}  # fmt: skip


def _reference() -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(FIXTURES / "raw_outputs_float64.safetensors"))


def _worst(raw: dict, ref: dict) -> float:
    return max(float((raw[k].double() - ref[k]).abs().max()) for k in ref)


def test_sizes_are_read_from_the_parameter_shapes():
    state, meta = mc.load_mmdet_checkpoint(CHECKPOINT)
    arch = mc.read_architecture(*(mc.mmdet2_names(state)[0], meta))
    assert (arch["embed_dim"], arch["depths"], arch["num_heads"], arch["window_size"]) == (8, [2, 2, 2, 2], [1, 2, 4, 8], 7)
    assert (arch["hidden_dim"], arch["num_queries"], arch["encoder_layers"], arch["decoder_layers"]) == (32, 8, 2, 3)
    assert (arch["encoder_feedforward_dim"], arch["dim_feedforward"], arch["num_attention_heads"], arch["num_labels"]) == (64, 128, 4, 80)


def test_raw_outputs_match_mmdet_in_float64(converted):
    ref = _reference()
    raw = _raw(_model(converted))
    for key in ref:
        assert raw[key].shape == ref[key].shape, key
    assert _worst(raw, ref) < RAW_TOL


@pytest.mark.parametrize("mistake", ["no_unfold_reorder", "q_k_swapped", "norms_swapped", "levels_reversed"])
def test_a_broken_mapping_fails_the_raw_check(mistake, monkeypatch, tmp_path):
    if mistake == "no_unfold_reorder":
        monkeypatch.setattr(mc, "unfold_to_patch_merging", lambda w: w)
    elif mistake == "q_k_swapped":
        split = mc._split3
        monkeypatch.setattr(mc, "_split3", lambda t: (lambda q, k, v: [k, q, v])(*split(t)))
    else:
        convert = mc.convert_state_dict

        def broken(state, arch, target):
            out = convert(state, arch, target)
            if mistake == "levels_reversed":
                key = "model.pixel_level_module.decoder.level_embed"
                out[key] = out[key].flip(0)
            else:  # the decoder's cross- and self-attention norms exchanged
                for key in [k for k in out if ".cross_attn_layer_norm." in k]:
                    other = key.replace(".cross_attn_layer_norm.", ".self_attn_layer_norm.")
                    out[key], out[other] = out[other], out[key]
            return out

        monkeypatch.setattr(mc, "convert_state_dict", broken)
    folder = mc.convert_mmdet_checkpoint(CHECKPOINT, tmp_path / "broken")
    assert _worst(_raw(_model(folder)), _reference()) > 1e-4


def _final(detector, picture: np.ndarray):
    image = torch.from_numpy(picture.copy()).permute(2, 0, 1).float() / 255
    return detector.detect(image[None])[0]


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_final_detections_match_mmdet_inference_detector(converted):
    pytest.importorskip("cv2")
    from jsbench.rewards.mask2former import GenevalOfficialDetector
    from jsbench.scoring.geneval import CLASSES

    detector = GenevalOfficialDetector.from_folder(converted, device="cpu")
    detector.min_score = -1.0  # every one of the 100, as mmdet returns them (GenEval thresholds later)
    record = json.loads((FIXTURES / "detections.json").read_text())
    flipped, total = 0, 0
    for item in record["images"]:
        picture = _picture(item["image"])
        h, w = item["size"]
        ours = sorted(_final(detector, picture), key=lambda d: (CLASSES.index(d.label), -d.confidence))
        theirs = sorted(item["detections"], key=lambda d: (d["label"], -d["score"]))
        assert len(ours) == len(theirs) == 100
        for a, b in zip(ours, theirs):
            assert a.label == CLASSES[b["label"]]
            assert abs(a.confidence - b["score"]) < 2e-5
            mask = np.unpackbits(np.frombuffer(bytes.fromhex(b["mask"]), np.uint8))[: h * w].reshape(h, w).astype(bool)
            flipped += int((a.mask.numpy() != mask).sum())
            total += mask.size
            if (a.mask.numpy() == mask).all():
                assert a.box == pytest.approx(b["box"], abs=1e-4)
    assert flipped <= total * 1e-3  # float32: a pixel at the logit-0 edge may flip; nothing more


def test_mmdet3_key_names_convert_to_the_same_weights(tmp_path):
    state, meta = mc.load_mmdet_checkpoint(CHECKPOINT)
    renamed = {}
    for key, value in state.items():
        for old, new in ((".attentions.0.", ".cross_attn."), (".attentions.1.", ".self_attn."), (".ffns.0.", ".ffn.")):
            if key.startswith("panoptic_head.transformer_decoder."):
                key = key.replace(old, new)
        if key.startswith("panoptic_head.pixel_decoder.encoder."):
            key = key.replace(".attentions.0.", ".self_attn.").replace(".ffns.0.", ".ffn.")
        renamed[key] = value
    torch.save({"meta": meta, "state_dict": renamed}, tmp_path / "mmdet3.pth")
    a = mc.convert_mmdet_checkpoint(CHECKPOINT, tmp_path / "a")
    b = mc.convert_mmdet_checkpoint(tmp_path / "mmdet3.pth", tmp_path / "b")
    from safetensors.torch import load_file

    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert json.loads((b / mc.PROVENANCE_FILE).read_text())["key_style"] == "mmdet-3"


@pytest.mark.parametrize("change", ["missing", "extra"])
def test_a_missing_or_extra_key_is_refused_in_one_line(change, tmp_path, cli):
    state, meta = mc.load_mmdet_checkpoint(CHECKPOINT)
    if change == "missing":
        del state["panoptic_head.transformer_decoder.layers.1.norms.2.bias"]
    else:
        state["panoptic_head.extra_head.weight"] = torch.zeros(3)
    torch.save({"meta": meta, "state_dict": state}, tmp_path / "bad.pth")
    code, out, err = cli("detectors", "convert-mmdet", tmp_path / "bad.pth", tmp_path / "out")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert ("lacks the key 'panoptic_head.transformer_decoder.layers.1.norms.2.bias'" if change == "missing"
            else "does not consume: 'panoptic_head.extra_head.weight'") in err  # fmt: skip
    assert not (tmp_path / "out").exists()


class Payload:  # a pickled object a weights-only load must refuse to build
    pass


def test_a_checkpoint_that_needs_code_to_unpickle_is_refused(tmp_path):
    state, meta = mc.load_mmdet_checkpoint(CHECKPOINT)
    torch.save({"meta": {**meta, "hook": Payload()}, "state_dict": state}, tmp_path / "hostile.pth")
    with pytest.raises(JsbenchError, match="weights-only .*Unsupported global: GLOBAL test_mmdet_convert.Payload"):
        mc.load_mmdet_checkpoint(tmp_path / "hostile.pth")


def test_the_folder_holds_safetensors_and_the_source_hash(converted):
    files = sorted(p.name for p in converted.iterdir())
    assert "model.safetensors" in files and not any(f.endswith((".bin", ".pth", ".pt")) for f in files)
    provenance = json.loads((converted / mc.PROVENANCE_FILE).read_text())
    assert provenance["source_sha256"] == hashlib.sha256(CHECKPOINT.read_bytes()).hexdigest()
    assert provenance["key_style"] == "mmdet-2" and provenance["architecture"]["embed_dim"] == 8


def test_the_spec_and_the_leaderboard_say_whose_weights(converted, monkeypatch):
    from types import SimpleNamespace

    from jsbench.report.leaderboard import provenance_text, unofficial_detectors
    from jsbench.rewards.detectors import default_detector_id, detector_id, detector_weights

    ident = detector_id(f"geneval-official:{converted}")
    assert ident.startswith("geneval-official:mask2former_reduced_mmdet2.pth@sha256:")
    assert json.loads((converted / mc.PROVENANCE_FILE).read_text())["official"] is False  # random weights
    assert "not a checkpoint GenEval publishes" in provenance_text({"detector": ident})
    official = "geneval-official:mask2former_swin-s-p4-w7-224_lsj_8x2_50e_coco.pth@sha256:743b7d99a1b2"
    assert "(GenEval's official weights, converted from mmdet)" in provenance_text({"detector": official})
    assert "not GenEval's" in detector_weights("mask2former:facebook/mask2former-swin-small-coco-instance")
    tables = [SimpleNamespace(provenance={"detector": d}) for d in (official, ident)]
    assert unofficial_detectors(tables, "geneval") == [ident]
    monkeypatch.delenv("JSBENCH_GENEVAL_DETECTOR", raising=False)
    monkeypatch.setenv("JSBENCH_GENEVAL_OFFICIAL", str(converted))
    assert default_detector_id() == f"geneval-official:{converted}"
    with pytest.raises(JsbenchError, match="convert-mmdet"):
        detector_id(f"geneval-official:{converted.parent / 'nothing'}")


def test_geneval_scores_end_to_end_with_the_converted_weights(converted, monkeypatch):
    """`JSBENCH_GENEVAL_OFFICIAL=FOLDER` makes the GenEval suite load and record the converted detector."""
    pytest.importorskip("cv2")
    from test_geneval_real import oracle_classifier

    from jsbench.backbones import listing_backbone
    from jsbench.rewards.mask2former import GenevalOfficialDetector
    from jsbench.suites import load_suite

    monkeypatch.delenv("JSBENCH_GENEVAL_DETECTOR", raising=False)
    monkeypatch.setenv("JSBENCH_GENEVAL_OFFICIAL", str(converted))
    real = SimpleNamespace(**{**vars(listing_backbone("sdxl")), "device": torch.device("cpu")})
    suite = load_suite("geneval", real, color_classifier=oracle_classifier())
    items = [next(it for it in suite.items("test") if it.task == t) for t in ("single_object", "counting")]
    images = torch.stack([torch.from_numpy(_picture("image1.png").copy()).permute(2, 0, 1).float() / 255] * 2)
    scores = suite.score(images, items)
    assert isinstance(suite.detector, GenevalOfficialDetector)
    assert all(s["correct"] in (0.0, 1.0) for s in scores)
    assert suite.provenance()["detector"].startswith("geneval-official:mask2former_reduced_mmdet2.pth@sha256:")


def test_genevals_full_size_keys_convert_with_nothing_left_over():
    """Every key real mmdet builds for GenEval's config (649 tensors, shapes only) is consumed, none is
    missing, and the sizes read are Swin-S Mask2Former's: the reduced fixture's mapping at full size."""
    from transformers import Mask2FormerForUniversalSegmentation

    keys = json.loads((FIXTURES / "geneval_full_size_keys.json").read_text())
    index = torch.tensor(keys["relative_position_index"])
    state = {k: index.clone() if k.endswith("relative_position_index") else torch.empty(shape, device="meta")
             for k, shape in keys["shapes"].items()}  # fmt: skip
    arch = mc.read_architecture(state, {"config": keys["config_text"]})
    assert (arch["embed_dim"], arch["depths"], arch["num_heads"], arch["window_size"]) == (96, [2, 2, 18, 2], [3, 6, 12, 24], 7)
    assert (arch["hidden_dim"], arch["num_queries"], arch["encoder_layers"], arch["decoder_layers"], arch["num_attention_heads"]) == (256, 100, 6, 9, 8)
    assert (arch["encoder_feedforward_dim"], arch["dim_feedforward"], arch["num_labels"]) == (1024, 2048, 80)
    with torch.device("meta"):
        target = Mask2FormerForUniversalSegmentation(mc.mask2former_config(arch)).state_dict()
    converted = mc.convert_state_dict(state, arch, target)
    assert sum(v.numel() for k, v in converted.items() if ".swin.layernorm." not in k and "criterion" not in k) == sum(
        math.prod(s) for k, s in keys["shapes"].items() if not k.endswith("relative_position_index"))

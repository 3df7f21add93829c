"""GenEval scored like the official evaluator: the official prompts from `jsbench prompts`, batch-independent
verdicts, the Mask2Former / mmdet detectors (tiny random configs and a stand-in mmdet module, nothing
downloaded), GenEval's colour crop and tie order, and provenance in records and leaderboards."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from test_geneval_real import RGB, _tiny_owl, oracle_classifier

from jsbench import JsbenchError
from jsbench.backbones import listing_backbone
from jsbench.rewards.color_classifier import ColorClassifier
from jsbench.rewards.detectors import OFFICIAL_DETECTOR_ID, detector_id
from jsbench.rewards.mask2former import Mask2FormerDetector, MMDetDetector, mask2bbox
from jsbench.scoring.geneval import CLASSES, Detection, evaluate_detections, group_detections
from jsbench.suites import load_suite
from jsbench.scoring.geneval_prompts import OFFICIAL_SHA256

REAL = SimpleNamespace(**{**vars(listing_backbone("sdxl")), "device": torch.device("cpu")})  # sdxl as listed, on the CPU


# ------------------------------------------------------------------------------------------ prompts


def test_cli_prints_the_official_metadata_without_loading_weights(cli, monkeypatch):
    import jsbench.backbones as backbones

    def no_weights(*args, **kwargs):
        raise AssertionError("listing prompts must not build a backbone")

    real_load = backbones.load_backbone
    monkeypatch.setattr(backbones, "load_backbone", no_weights)
    code, out, err = cli("prompts", "--suite", "geneval", "--backbone", "flux-dev", "--format", "jsonl")
    assert code == 0, err
    assert hashlib.sha256(out.encode()).hexdigest() == OFFICIAL_SHA256 and out.count("\n") == 553
    monkeypatch.setattr(backbones, "load_backbone", real_load)  # an embedded world is built to list its prompts (it is small)
    code, out, _ = cli("prompts", "--suite", "geneval", "--backbone", "analytic", "--format", "jsonl")
    assert code == 0 and all(json.loads(line)["prompt"] for line in out.splitlines())  # the world's own prompts
    code, _, err = cli("prompts", "--format", "xml")
    assert code != 0 and "--format" in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------------- tie order, rules


def test_equal_scores_keep_the_later_listed_detection_like_genevals_reversed_argsort():
    first = Detection("dog", (0, 0, 10, 10), 0.8, color="red")
    second = Detection("dog", (50, 0, 60, 10), 0.8, color="blue")
    assert group_detections([first, second], "colors")["dog"] == [second, first]
    meta = {"tag": "colors", "prompt": "a photo of a blue dog", "include": [{"class": "dog", "count": 1, "color": "blue"}]}
    assert evaluate_detections([first, second], meta)[0] and not evaluate_detections([second, first], meta)[0]
    # the same call GenEval makes, on the same scores
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.7], dtype=np.float32)
    dets = [Detection("cat", (i, 0, i + 1, 1), float(s)) for i, s in enumerate(scores)]
    assert [d.box[0] for d in group_detections(dets, "single_object")["cat"]] == list(np.argsort(scores)[::-1])
    assert "cat" not in group_detections([Detection("cat", (0, 0, 1, 1), 0.3)], "single_object")  # strictly above 0.3


# ------------------------------------------------------------------------------ batch independence


class CountingOwl:
    """Wraps a detector and records which classes each forward was asked for."""

    def __init__(self, inner):
        self.inner, self.calls, self.id = inner, [], "owl:tiny"

    def detect(self, images, classes=None):
        self.calls.append([list(c) for c in classes])
        return self.inner.detect(images, classes)


def test_a_verdict_depends_on_its_image_and_prompt_only(tmp_path):
    owl = _tiny_owl(tmp_path)
    torch.manual_seed(1)
    image, other = torch.rand(3, 32, 32), torch.rand(3, 32, 32)
    dog = {"tag": "counting", "prompt": "a photo of two dogs", "include": [{"class": "dog", "count": 2}], "exclude": [{"class": "dog", "count": 3}]}
    cat = {"tag": "single_object", "prompt": "a photo of a cat", "include": [{"class": "cat", "count": 1}]}
    alone = owl.detect(image[None], [["dog"]])[0]
    with_cat = owl.detect(torch.stack([image, other]), [["dog"], ["cat"]])[0]
    assert alone and [(d.label, d.box, d.confidence) for d in alone] == [(d.label, d.box, d.confidence) for d in with_cat]
    assert all(d.label == "dog" for d in alone)
    # through the suite: the dog prompt's verdict and detections do not see the cat prompt
    from jsbench.suites.base import EvalItem

    suite = load_suite("geneval", REAL, detector=CountingOwl(owl))
    solo = suite.score(image[None], [EvalItem(dog["prompt"], "counting", dog)])
    mixed = suite.score(torch.stack([image, other, image]), [EvalItem(dog["prompt"], "counting", dog), EvalItem(cat["prompt"], "single_object", cat), EvalItem(dog["prompt"], "counting", dog)])
    assert solo[0] == mixed[0] == mixed[2]
    assert suite.detector.calls[-1] == [["dog"], ["cat"], ["dog"]]


# ---------------------------------------------------------------------------------------- Mask2Former


def _tiny_mask2former(num_labels: int = 80, seed: int = 0):
    from transformers import Mask2FormerConfig, Mask2FormerForUniversalSegmentation, SwinConfig

    backbone = SwinConfig(image_size=64, patch_size=4, embed_dim=32, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=4,
                          out_features=["stage1", "stage2", "stage3", "stage4"])  # fmt: skip
    config = Mask2FormerConfig(backbone_config=backbone, num_labels=num_labels, hidden_dim=32, mask_feature_size=32, feature_size=32,
                               num_queries=12, encoder_layers=1, decoder_layers=2, encoder_feedforward_dim=32, dim_feedforward=32,
                               num_attention_heads=2, common_stride=4, use_pretrained_backbone=False)  # fmt: skip
    torch.manual_seed(seed)
    model = Mask2FormerForUniversalSegmentation(config).eval()
    with torch.no_grad():  # a random head spreads probability thinly; sharpen it so some pairs pass 0.3
        model.class_predictor.weight.mul_(40.0)
    return model


def _reference_instances(class_logits, mask_logits, input_size, valid, size, k=100, threshold=0.3):
    """mmdet's instance post-processing written out the slow way: every (query, class) pair, all masks."""
    probs = torch.softmax(class_logits.float(), -1)[:, :-1]
    flat = probs.flatten()
    chosen = set(flat.topk(min(k, flat.numel())).indices.tolist())
    masks = torch.nn.functional.interpolate(mask_logits[None].float(), size=input_size, mode="bilinear", align_corners=False)
    masks = torch.nn.functional.interpolate(masks[..., : valid[0], : valid[1]], size=size, mode="bilinear", align_corners=False)[0]
    out = []
    for idx in sorted(chosen):
        q, c = divmod(idx, probs.shape[1])
        if c >= 80:
            continue
        binary = masks[q] > 0
        score = float(probs[q, c] * (masks[q].sigmoid() * binary).sum() / (binary.sum() + 1e-6))
        if score > threshold:
            ys, xs = torch.nonzero(binary, as_tuple=True)
            out.append((CLASSES[c], round(score, 5), (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))))
    return sorted(out)


def test_mask2former_matches_mmdets_instance_postprocessing_and_is_per_image():
    det = Mask2FormerDetector(_tiny_mask2former(), model_id="tiny", device="cpu", scale=(96, 64))
    torch.manual_seed(3)
    images = torch.rand(2, 3, 40, 56)
    pixels, valid = det.preprocess(images[:1])
    assert valid == (64, 90) and pixels.shape[-2:] == (64, 96)  # fit in 96 x 64 keeping the aspect (x1.6), pad to /32
    found = det.detect(images)
    assert found[0], "the sharpened tiny model should find something"
    for image, dets in zip(images, found):
        outputs, input_size, valid = det.raw(image[None])
        want = _reference_instances(outputs.class_queries_logits[0], outputs.masks_queries_logits[0], input_size, valid, (40, 56))
        assert sorted((d.label, round(d.confidence, 5), d.box) for d in dets) == want
        for d in dets:
            assert d.mask.dtype == torch.bool and d.mask.shape == (40, 56)
            assert tuple(mask2bbox(d.mask[None])[0].tolist()) == d.box
    alone = det.detect(images[1:])[0]
    assert [(d.label, d.box) for d in alone] == [(d.label, d.box) for d in found[1]]
    np.testing.assert_allclose([d.confidence for d in alone], [d.confidence for d in found[1]], rtol=1e-5)


def test_mask2former_refuses_a_non_coco_model_and_missing_weights(tmp_path, monkeypatch):
    from jsbench.rewards.detectors import DetectorUnavailable, load_detector

    with pytest.raises(DetectorUnavailable, match="80"):
        Mask2FormerDetector(_tiny_mask2former(num_labels=10), model_id="tiny10", device="cpu")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("JSBENCH_GENEVAL_DETECTOR", raising=False)
    with pytest.raises(DetectorUnavailable) as err:
        load_detector(None, device="cpu")
    assert "facebook/mask2former-swin-small-coco-instance" in str(err.value) and "\n" not in str(err.value)
    assert detector_id() == "mask2former:facebook/mask2former-swin-small-coco-instance"
    assert detector_id("owl") == "owl:google/owlv2-base-patch16-ensemble" and detector_id("mmdet") == OFFICIAL_DETECTOR_ID
    assert detector_id("world") == "embedded-exact" and detector_id("/models/owlv2-large").startswith("owl:")


def test_mask2former_scores_end_to_end_through_the_suite(tmp_path):
    det = Mask2FormerDetector(_tiny_mask2former(), model_id="tiny", device="cpu", scale=(96, 64))
    suite = load_suite("geneval", REAL, detector=det, color_classifier=oracle_classifier())
    items = [next(it for it in suite.items("test") if it.task == t) for t in ("colors", "counting")]
    scores = suite.score(torch.rand(2, 3, 32, 32), items)
    assert all(s["correct"] in (0.0, 1.0) for s in scores)
    assert suite.provenance()["detector"] == "mask2former:tiny"


# --------------------------------------------------------------------------------------------- mmdet


def _stand_in_mmdet(monkeypatch, result_of):
    """A stand-in `mmdet` package: init_detector records its arguments, inference_detector its input."""
    seen = {}
    mmdet = types.ModuleType("mmdet")
    mmdet.__file__ = "/nowhere/mmdet/__init__.py"
    apis = types.ModuleType("mmdet.apis")

    def init_detector(config, checkpoint, device="cuda:0"):
        seen["init"] = (config, checkpoint, device)
        return "model"

    def inference_detector(model, image):
        seen.setdefault("images", []).append(image)
        return result_of(image)

    apis.init_detector, apis.inference_detector = init_detector, inference_detector
    mmdet.apis = apis
    monkeypatch.setitem(sys.modules, "mmdet", mmdet)
    monkeypatch.setitem(sys.modules, "mmdet.apis", apis)
    return seen


def test_mmdet_path_reads_mmdet2_tuples_and_mmdet3_samples(tmp_path, monkeypatch):
    h, w = 6, 8
    dog, cat = CLASSES.index("dog"), CLASSES.index("cat")
    mask_a = np.zeros((h, w), dtype=bool)
    mask_a[1:3, 2:5] = True
    mask_b = np.zeros((h, w), dtype=bool)
    mask_b[4:6, 0:2] = True

    def mmdet2(image):
        bbox = [np.zeros((0, 5), dtype=np.float32) for _ in CLASSES]
        segm = [[] for _ in CLASSES]
        bbox[dog] = np.array([[2, 1, 5, 3, 0.95], [0, 4, 2, 6, 0.2], [0, 4, 2, 6, 0.95]], dtype=np.float32)
        segm[dog] = [mask_a, mask_b, mask_b]
        bbox[cat] = np.array([[0, 0, 1, 1, 0.5]], dtype=np.float32)
        segm[cat] = [mask_b]
        return bbox, segm

    seen = _stand_in_mmdet(monkeypatch, mmdet2)
    config, ckpt = tmp_path / "m2f.py", tmp_path / "m2f.pth"
    config.write_text("# config\n")
    ckpt.write_bytes(b"\0")
    with pytest.raises(JsbenchError, match="checkpoint"):
        MMDetDetector(config=str(config), device="cpu")
    det = MMDetDetector(config=str(config), checkpoint=str(ckpt), device="cpu")
    assert seen["init"] == (str(config), str(ckpt), "cpu") and det.id == OFFICIAL_DETECTOR_ID
    image = torch.zeros(1, 3, h, w)
    image[0, 0] = 1.0  # red
    found = det.detect(image)[0]
    assert seen["images"][0].shape == (h, w, 3) and seen["images"][0].dtype == np.uint8
    assert seen["images"][0][0, 0].tolist() == [0, 0, 255]  # BGR, as mmdet reads a file
    assert [(d.label, d.confidence) for d in found] == [("cat", 0.5), ("dog", pytest.approx(0.95)), ("dog", pytest.approx(0.95))]
    assert found[1].mask.tolist() == mask_a.tolist() and found[2].box == (0.0, 4.0, 2.0, 6.0)
    # equal scores: the later-listed dog (bottom left) is GenEval's first
    assert group_detections(found, "single_object")["dog"][0].box == (0.0, 4.0, 2.0, 6.0)

    class Instances(dict):
        def __getattr__(self, key):
            return self[key]

    sample = SimpleNamespace(pred_instances=Instances(bboxes=torch.tensor([[2.0, 1, 5, 3]]), scores=torch.tensor([0.8]),
                                                      labels=torch.tensor([dog]), masks=torch.from_numpy(mask_a[None])))  # fmt: skip
    seen3 = _stand_in_mmdet(monkeypatch, lambda image: sample)
    found3 = MMDetDetector(config=str(config), checkpoint=str(ckpt), device="cpu").detect(image)[0]
    assert seen3["images"] and [(d.label, d.box) for d in found3] == [("dog", (2.0, 1.0, 5.0, 3.0))] and found3[0].mask.sum() == 6


def test_mmdet_refuses_in_one_line_without_mmdet(monkeypatch):
    monkeypatch.setitem(sys.modules, "mmdet", None)
    with pytest.raises(JsbenchError, match="mmdet") as err:
        MMDetDetector()
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------- colour

def test_colour_crop_is_genevals_mask_on_grey_153_with_pil_rounding():
    from PIL import Image

    image = torch.rand(3, 10, 12)
    mask = torch.zeros(10, 12, dtype=torch.bool)
    mask[2:6, 3:9] = True
    box = (2.5, 1.5, 9.5, 6.5)  # PIL rounds half to even: (2, 2, 10, 6)
    crop = ColorClassifier.crops(image, [box], [mask])[0]
    assert crop.size == (8, 4)
    # independently: the PNG-rounded picture, mask pixels kept, the rest #999
    u8 = (image.clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
    want = np.where(mask.numpy()[..., None], u8, np.uint8(153))[2:6, 2:10]
    assert np.array_equal(np.asarray(crop), want)
    assert np.asarray(crop)[0, 0].tolist() == [153, 153, 153]
    # without a mask the crop is the picture itself
    plain = ColorClassifier.crops(image, [(0.4, 0.6, 3.5, 2.5)])[0]
    assert np.array_equal(np.asarray(plain), u8[1:2, 0:4])
    assert isinstance(plain, Image.Image)


def test_colour_pixels_follow_open_clips_eval_transform():
    from PIL import Image

    clf = oracle_classifier()  # image_size 8, mean 0, std 1
    wide = Image.new("RGB", (20, 10), (255, 0, 0))
    wide.paste((0, 0, 255), (0, 0, 6, 10))  # a blue band on the left, cut by the centre crop
    x = clf.pixels([wide])
    assert x.shape == (1, 3, 8, 8)
    resized = np.asarray(wide.resize((16, 8), Image.BICUBIC).crop((4, 0, 12, 8)), dtype=np.float32) / 255
    np.testing.assert_allclose(x[0].permute(1, 2, 0).numpy(), resized, atol=1e-6)


def test_colour_classifier_uses_masks_and_runs_clip_in_fp32(monkeypatch):
    clf = oracle_classifier()
    img = torch.full((3, 32, 48), 0.5)
    img[:, 4:14, 4:14] = torch.tensor(RGB["red"]).view(3, 1, 1)
    img[:, 4:14, 30:40] = torch.tensor(RGB["blue"]).view(3, 1, 1)
    assert clf.classify(img, [(4, 4, 14, 14), (30, 4, 40, 14)], "cat") == ["red", "blue"]
    blue = torch.zeros(32, 48, dtype=torch.bool)
    blue[4:14, 30:40] = True
    assert clf.classify(img, [(0, 0, 48, 32)], "cat", masks=[blue]) == ["blue"]
    red = torch.zeros(32, 48, dtype=torch.bool)
    red[4:14, 4:14] = True
    assert clf.classify(img, [(0, 0, 48, 32)], "cat", masks=[red]) == ["red"]
    # the default model is loaded in float32, and the id says how it runs
    import jsbench.rewards.clip as clip_mod

    asked = {}

    def fake(spec, device=None, dtype=None):
        asked.update(spec=spec, dtype=dtype)
        return clf.clip

    monkeypatch.setattr(clip_mod, "clip_from_spec", fake)
    monkeypatch.delenv("JSBENCH_GENEVAL_COLOR_MODEL", raising=False)
    default = ColorClassifier(colors=tuple(RGB))
    assert default.id == "ViT-L-14:openai/fp32+cuda-amp" and ColorClassifier(amp=False).id == "ViT-L-14:openai/fp32"
    assert default.classify(img, [(4, 4, 14, 14)], "cat") == ["red"]
    assert asked == {"spec": "ViT-L-14:openai", "dtype": torch.float32}


# ----------------------------------------------------------------------------------------- provenance


def _records(tmp_path, suite, method="default", value=0.5):
    from jsbench.evaluation.evaluate import EvalRun
    from jsbench.evaluation.results import make_records

    items = suite.items("test")[:6]
    run = EvalRun(items=items, seeds=[0, 1], scores=[{"correct": value} for _ in items for _ in range(2)])
    bb = SimpleNamespace(name="flux-dev", model_id="black-forest-labs/FLUX.1-dev")
    source = SimpleNamespace(steps=4, budget=4, label=method, spec=method, checksum=None)
    return make_records(bb, suite, source, run)


def test_records_carry_provenance_and_old_records_still_load(tmp_path, monkeypatch):
    from jsbench.evaluation.results import append_records, read_records

    official = load_suite("geneval", REAL, detector="owl")
    recs = _records(tmp_path, official)
    prov = recs[0].provenance()
    assert prov["detector"] == "owl:google/owlv2-base-patch16-ensemble" and prov["color_model"].startswith("ViT-L-14:openai/fp32")
    from jsbench.scoring.geneval_prompts import make_geneval_prompts, prompt_set_hash

    assert prov["prompt_set"] == prompt_set_hash(make_geneval_prompts()[:6]) and prov["ocr_engine"] is None
    from jsbench.evaluation.results import prompt_set_hash as items_hash

    assert items_hash(official.items("test")) == OFFICIAL_SHA256  # the whole official set hashes like the file
    path = tmp_path / "records.jsonl"
    append_records(path, recs)
    old = {k: v for k, v in json.loads(path.read_text().splitlines()[0]).items() if k not in prov}
    with open(path, "a") as f:
        f.write(json.dumps({**old, "added_by_a_later_version": 1}) + "\n")
    back = read_records(path)
    assert len(back) == len(recs) + 1 and back[-1].detector is None and back[0].provenance() == prov
    assert back[-1].key() != back[0].key()  # another provenance is another record, not a newer one
    world = load_suite("geneval")
    assert world.provenance() == {"detector": "embedded-exact", "color_model": "embedded-exact"}
    for style in ("anime", "concept-art", "paintings", "photo"):
        (tmp_path / f"{style}.json").write_text(json.dumps([f"{style} prompt"]))
    (tmp_path / "HPS_v2_compressed.pt").write_bytes(b"")  # provenance locates the checkpoint (refuses without one)
    monkeypatch.setenv("JSBENCH_HPS_CHECKPOINT", str(tmp_path / "HPS_v2_compressed.pt"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # no HPDv2 training set cached either
    hps = load_suite("hpdv2", prompts_dir=str(tmp_path), version="v2").provenance()
    assert hps["reward_model"].startswith("hps-v2") and hps["reward_model"].endswith("HPS_v2_compressed.pt")
    assert hps["protocol"] == "benchmark-split"  # no training set in tmp_path (nor its parent)
    assert load_suite("ocr").provenance()["ocr_engine"]


def test_leaderboard_rows_are_keyed_by_provenance_and_say_when_the_detector_is_not_official(tmp_path):
    from jsbench.report.leaderboard import build_tables, merge_tables, render_csv, render_markdown, tables_from_csv

    owl = _records(tmp_path, load_suite("geneval", REAL, detector="owl"), value=0.25)
    m2f = _records(tmp_path, load_suite("geneval", REAL, detector="mask2former"), value=0.75)
    tables = build_tables(owl + m2f, "geneval", "correct")
    assert len(tables) == 2 and {t.provenance["detector"] for t in tables} == {"owl:google/owlv2-base-patch16-ensemble", "mask2former:facebook/mask2former-swin-small-coco-instance"}
    assert sorted(t.rows[0]["overall"] for t in tables) == [0.25, 0.75]  # never one row for both
    page = render_markdown(tables, "geneval", "correct", "jsbench compare")
    assert "not GenEval's official detector" in page and "Scored by detector `owl:google/owlv2-base-patch16-ensemble`" in page
    from dataclasses import replace

    official = [replace(r, detector=OFFICIAL_DETECTOR_ID) for r in m2f]
    assert "not GenEval's official" not in render_markdown(build_tables(official, "geneval", "correct"), "geneval", "correct", "c")
    text = render_csv(tables)
    import csv
    import io

    back = tables_from_csv(list(csv.DictReader(io.StringIO(text))))
    assert sorted(t.key for t in back) == sorted(t.key for t in tables)
    # a section written before provenance was recorded is superseded by a fresh section of its budget
    legacy_rows = [{k: v for k, v in r.items() if k not in ("detector", "color_model", "prompt_set", "ocr_engine", "reward_model")} for r in csv.DictReader(io.StringIO(text))]
    merged = merge_tables(tables_from_csv(legacy_rows), tables)
    assert sorted(t.key for t in merged) == sorted(t.key for t in tables)
    # ... and so is one written before a later field (guidance): every field it has agrees with the fresh one
    guided = [replace(t, provenance={**t.provenance, "guidance": "3"}) for t in tables]
    assert sorted(t.key for t in merge_tables(tables, guided)) == sorted(t.key for t in guided)
    # ... but not by a section sampled at another guidance than the pipeline's own (named by --guidance)
    other = [replace(t, provenance={**t.provenance, "guidance": "1.5"}, command=t.command + " --guidance 1.5") for t in tables]
    assert len(merge_tables(tables, other)) == 4
    # a section scored otherwise (another detector) is kept beside the fresh one
    assert len(merge_tables(tables, guided[:1])) == 2

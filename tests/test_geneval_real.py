"""GenEval on real images: our prompt generator, the official-file loader, detectors (tiny random OWLv2
built from config, with transformers' own post-processing as reference), the CLIP colour rule and the
suite's scoring and aggregates. Nothing is downloaded."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from jsbench import JsbenchError
from jsbench.backbones import listing_backbone
from jsbench.rewards.clip import ClipModel
from jsbench.rewards.color_classifier import ColorClassifier
from jsbench.rewards.detectors import WorldDetector
from jsbench.rewards.mask2former import MMDetDetector
from jsbench.rewards.owl import OwlDetector, nms, owl_postprocess
from jsbench.scoring.geneval import Detection
from jsbench.suites import load_suite
from jsbench.suites.geneval import GenEvalSuite, RealGenEvalSuite
from jsbench.scoring.geneval_prompts import (
    COCO_CLASSES,
    COLORS,
    OFFICIAL_SHA256,
    TASK_SIZES,
    load_metadata,
    make_geneval_prompts,
    metadata_jsonl,
    plural,
    prompt_set_hash,
    rules_key,
    split_geneval_prompts,
    validate_entry,
)

REAL = SimpleNamespace(**{**vars(listing_backbone("sdxl")), "device": torch.device("cpu")})  # sdxl as listed, on the CPU


# ------------------------------------------------------------------------------------------ prompts


def test_generator_reproduces_the_official_file_byte_for_byte():
    prompts = make_geneval_prompts()  # seed 43, GenEval's
    text = metadata_jsonl(prompts)
    assert hashlib.sha256(text.encode()).hexdigest() == OFFICIAL_SHA256 == prompt_set_hash(prompts)
    assert text.count("\n") == 553 and Counter(p["tag"] for p in prompts) == TASK_SIZES
    assert len(set(COCO_CLASSES)) == 80 and len(COLORS) == 10
    assert make_geneval_prompts() == prompts and make_geneval_prompts(1) != prompts
    for p in prompts:
        validate_entry(p)
    by_tag = {t: [p for p in prompts if p["tag"] == t] for t in TASK_SIZES}
    assert {p["include"][0]["class"] for p in by_tag["single_object"]} == set(COCO_CLASSES)
    assert by_tag["single_object"][0]["prompt"] == "a photo of a bench"  # a permutation, not COCO order
    for p in by_tag["counting"]:
        n = p["include"][0]["count"]
        assert 2 <= n <= 4 and p["exclude"] == [{"class": p["include"][0]["class"], "count": n + 1}]
        assert p["prompt"] == f"a photo of {['two', 'three', 'four'][n - 2]} {plural(p['include'][0]['class'])}"
    for p in by_tag["position"]:
        b, a = p["include"]
        assert a["position"][1] == 0 and p["prompt"].endswith(f"{a['position'][0]} {'an' if b['class'][0] in 'aeiou' else 'a'} {b['class']}")
    for p in by_tag["colors"] + by_tag["color_attr"]:
        assert all(r["class"] != "person" for r in p["include"])
    for p in by_tag["color_attr"]:
        assert len({r["color"] for r in p["include"]}) == 2
    # GenEval's suffix rule, not English
    assert [plural(c) for c in ("bus", "person", "sheep", "knife", "toothbrush", "bench")] == ["buses", "persons", "sheeps", "knifes", "toothbrushs", "benchs"]


def test_training_prompts_never_share_a_test_items_rules():
    test = make_geneval_prompts()
    train = split_geneval_prompts(test, "train")
    held = {rules_key(p) for p in test}
    assert train and not held & {rules_key(p) for p in train}
    assert len({rules_key(p) for p in train}) == len(train)
    assert not {p["tag"] for p in train} & {"single_object"}  # every single-object rule is a test item
    # the same rules under another spelling or order are the same item
    swapped = {"tag": "two_object", "include": test[80]["include"][::-1], "prompt": "another spelling"}
    assert rules_key(swapped) in held
    position = next(p for p in test if p["tag"] == "position")
    assert rules_key({**position, "include": position["include"][::-1]}) not in held  # order carries the relation
    assert split_geneval_prompts(test, "train", train_seeds=(0, 1))[: len(train)] == train


def test_load_official_metadata_and_malformed_lines(tmp_path):
    path = tmp_path / "evaluation_metadata.jsonl"
    lines = [json.dumps(p) for p in make_geneval_prompts()[:3]]
    path.write_text("\n".join(lines) + "\n\n")
    assert load_metadata(path) == make_geneval_prompts()[:3]
    path.write_text(lines[0] + "\n{broken\n")
    with pytest.raises(JsbenchError, match=r"evaluation_metadata.jsonl:2: not valid JSON"):
        load_metadata(path)
    path.write_text(lines[0] + "\n" + json.dumps({"tag": "colors", "prompt": "x", "include": [{"class": "cat"}]}) + "\n")
    with pytest.raises(JsbenchError, match=r":2: include\[0\] needs a positive integer 'count'"):
        load_metadata(path)
    bad_pos = {"tag": "position", "prompt": "x", "include": [{"class": "cat", "count": 1, "position": ["near", 0]}]}
    path.write_text(json.dumps(bad_pos) + "\n")
    with pytest.raises(JsbenchError, match=":1: include"):
        load_metadata(path)
    with pytest.raises(JsbenchError, match="not found"):
        load_metadata(tmp_path / "missing.jsonl")


# ---------------------------------------------------------------------------------------- detectors


def _tiny_owl(tmp_path):
    from transformers import CLIPTokenizer, Owlv2Config, Owlv2ForObjectDetection

    words = ["a", "photo", "of", "dog", "cat", "bus"]
    vocab = {"!": 0}
    for c in sorted(set("".join(words))):
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    for w in words:
        vocab.setdefault(w + "</w>", len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    tok = CLIPTokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    n = len(vocab)
    text = dict(vocab_size=n, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                max_position_embeddings=16, bos_token_id=n - 2, eos_token_id=n - 1, pad_token_id=n - 1)  # fmt: skip
    vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8)
    torch.manual_seed(0)
    model = Owlv2ForObjectDetection(Owlv2Config(text_config=text, vision_config=vision, projection_dim=16)).eval()
    # a random head puts every logit near -inf; zero its scale/shift so scores sit around 0.5
    for layer in (model.class_head.logit_scale, model.class_head.logit_shift):
        layer.weight.data.zero_()
        layer.bias.data.zero_()
    return OwlDetector(model, tok, device="cpu", min_score=0.3)


def test_owl_postprocessing_matches_transformers(tmp_path):
    from transformers import Owlv2ImageProcessor

    det = _tiny_owl(tmp_path)
    images = torch.rand(2, 3, 24, 40)
    out = det.raw(images, ["dog", "cat"])
    mine = owl_postprocess(out.logits, out.pred_boxes, ["dog", "cat"], [(24, 40)] * 2, padded=True, min_score=0.3, iou=1.1)
    # per class, transformers' post-processing of that class's logits alone (each class scored independently)
    for c, name in enumerate(["dog", "cat"]):
        one = type(out)(logits=out.logits[..., c : c + 1], pred_boxes=out.pred_boxes)
        ref = Owlv2ImageProcessor().post_process_object_detection(one, threshold=0.3, target_sizes=[(40, 40)] * 2)
        for got, want in zip(mine, ref):
            got = [d for d in got if d.label == name]
            assert len(got) == len(want["scores"]) > 0
            order = want["scores"].argsort(descending=True)
            boxes = want["boxes"][order].clone()
            boxes[:, 0::2] = boxes[:, 0::2].clamp(0, 40)
            boxes[:, 1::2] = boxes[:, 1::2].clamp(0, 24)
            torch.testing.assert_close(torch.tensor([d.confidence for d in got]), want["scores"][order], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(torch.tensor([d.box for d in got]), boxes, rtol=1e-4, atol=1e-3)
    # detect(): class names from the caller, NMS on top, every box inside the image
    dets = det.detect(images, ["dog", "cat", "dog"])
    assert len(dets) == 2 and all(d.label in {"dog", "cat"} and d.confidence >= 0.3 for d in dets[0])
    assert all(0 <= d.box[0] <= d.box[2] <= 40 and 0 <= d.box[1] <= d.box[3] <= 24 for ds in dets for d in ds)
    assert sum(len(d) for d in dets) <= sum(len(d) for d in mine)


def test_owl_scores_each_class_independently():
    # 3 boxes; box 0 scores high for both dog and cat (overlapping classes), box 1 only for dog, box 2 for none
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    logits = torch.tensor([[[logit(0.8), logit(0.9)], [logit(0.6), logit(0.1)], [logit(0.2), logit(0.2)]]])
    boxes = torch.tensor([[[0.25, 0.25, 0.2, 0.2], [0.75, 0.75, 0.2, 0.2], [0.5, 0.5, 0.1, 0.1]]])
    both = owl_postprocess(logits, boxes, ["dog", "cat"], [(40, 40)], padded=True, min_score=0.3)[0]
    dog = owl_postprocess(logits[..., :1], boxes, ["dog"], [(40, 40)], padded=True, min_score=0.3)[0]
    cat = owl_postprocess(logits[..., 1:], boxes, ["cat"], [(40, 40)], padded=True, min_score=0.3)[0]
    # box 0 counts as a dog (0.8) and as a cat (0.9): a best-class-per-box rule would give one dog, not two
    assert sorted((d.label, round(d.confidence, 4)) for d in both) == [("cat", 0.9), ("dog", 0.6), ("dog", 0.8)]
    # a class's detections are the same whether queried alone or with the other class
    for name, alone in (("dog", dog), ("cat", cat)):
        assert [(d.box, d.confidence) for d in both if d.label == name] == [(d.box, d.confidence) for d in alone]
    assert both[0].box == both[1].box  # the same box, two classes


def test_nms_keeps_best_of_overlaps():
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], dtype=torch.float32)
    assert nms(boxes, torch.tensor([0.5, 0.9, 0.4])).tolist() == [1, 2]


def test_missing_detector_weights_and_mmdet_refuse_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("JSBENCH_GENEVAL_DETECTOR", raising=False)
    suite = load_suite("geneval", REAL)
    items = suite.items("test")[:1]  # listing needs no weights
    with pytest.raises(JsbenchError) as err:
        suite.score(torch.rand(1, 3, 16, 16), items)
    msg = str(err.value)
    assert "\n" not in msg and "facebook/mask2former-swin-small-coco-instance" in msg and "hf download" in msg
    with pytest.raises(JsbenchError, match="google/owlv2-base-patch16-ensemble"):
        load_suite("geneval", REAL, detector="owl").score(torch.rand(1, 3, 16, 16), items)
    monkeypatch.setenv("JSBENCH_GENEVAL_DETECTOR", "acme/owl-custom")
    with pytest.raises(JsbenchError, match="acme/owl-custom"):
        load_suite("geneval", REAL).score(torch.rand(1, 3, 16, 16), items)
    with pytest.raises(JsbenchError, match="mmdet") as err:
        MMDetDetector()
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------- colour

RGB = {"red": (1.0, 0.0, 0.0), "green": (0.0, 1.0, 0.0), "blue": (0.0, 0.0, 1.0)}


class OracleClip(torch.nn.Module):
    """Image feature: mean RGB minus grey. Text feature: the RGB of the colour word (token id)."""

    def encode_image(self, x):
        return x.mean((-1, -2)) - 0.5

    def encode_text(self, tokens):
        return torch.tensor([RGB[list(RGB)[int(t[0])]] for t in tokens]) - 0.5


def oracle_classifier():
    def tok(texts):
        return torch.tensor([[next(i for i, c in enumerate(RGB) if f" {c}" in t)] for t in texts])

    clip = ClipModel(OracleClip(), tok, image_size=8, mean=(0, 0, 0), std=(1, 1, 1), device="cpu")
    return ColorClassifier(clip, colors=tuple(RGB))


def _scene(h=32, w=48):
    img = torch.full((3, h, w), 0.5)
    img[:, 4:14, 4:14] = torch.tensor(RGB["red"]).view(3, 1, 1)
    img[:, 4:14, 30:40] = torch.tensor(RGB["blue"]).view(3, 1, 1)
    return img


def test_color_classifier_crops_and_composites_on_grey():
    clf = oracle_classifier()
    img = _scene()
    assert clf.classify(img, [(4, 4, 14, 14), (30, 4, 40, 14)], "cat") == ["red", "blue"]
    # a box over both objects, but the mask keeps only the blue one: the rest becomes grey
    mask = torch.zeros(32, 48)
    mask[4:14, 30:40] = 1
    assert clf.classify(img, [(0, 0, 48, 32)], "cat", masks=[mask]) == ["blue"]
    assert clf.classify(img, [], "cat") == []


# -------------------------------------------------------------------------------------------- suite


class FixedDetector:
    """Detections of `_scene`: a red cat on the left, a blue dog on the right."""

    name = "fixed"

    def __init__(self):
        self.classes = []

    def detect(self, images, classes=None):
        self.classes.append(list(classes))
        return [[Detection("cat", (4, 4, 14, 14), 0.95), Detection("dog", (30, 4, 40, 14), 0.95)] for _ in range(len(images))]


def test_suite_scores_with_genevals_rules(tmp_path):
    assert isinstance(load_suite("geneval"), GenEvalSuite)  # the analytic path is unchanged
    meta = [
        {"tag": "single_object", "prompt": "a photo of a cat", "include": [{"class": "cat", "count": 1}]},
        {"tag": "two_object", "prompt": "a photo of a cat and a bus", "include": [{"class": "cat", "count": 1}, {"class": "bus", "count": 1}]},
        {"tag": "counting", "prompt": "a photo of two cats", "include": [{"class": "cat", "count": 2}], "exclude": [{"class": "cat", "count": 3}]},
        {"tag": "colors", "prompt": "a photo of a red cat", "include": [{"class": "cat", "count": 1, "color": "red"}]},
        {"tag": "position", "prompt": "a photo of a dog right of a cat",
         "include": [{"class": "cat", "count": 1}, {"class": "dog", "count": 1, "position": ["right of", 0]}]},
        {"tag": "color_attr", "prompt": "a photo of a blue cat and a red dog",
         "include": [{"class": "cat", "count": 1, "color": "blue"}, {"class": "dog", "count": 1, "color": "red"}]},
    ]  # fmt: skip
    path = tmp_path / "evaluation_metadata.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in meta))
    detector = FixedDetector()
    suite = load_suite("geneval", REAL, metadata=str(path), detector=detector, color_classifier=oracle_classifier())
    assert isinstance(suite, RealGenEvalSuite)
    items = suite.items("test")
    items = items + items[:1]  # two images of the first prompt
    scores = suite.score(torch.stack([_scene()] * len(items)), items)
    assert [s["correct"] for s in scores] == [1, 0, 0, 1, 1, 0, 1]
    assert detector.classes[0] == [["cat"], ["cat", "bus"], ["cat"], ["cat"], ["cat", "dog"], ["cat", "dog"], ["cat"]]  # each image its own
    metrics = {(m.task, m.metric): m.value for m in suite.aggregate(scores, items)}
    assert metrics[("overall", "correct")] == pytest.approx(3 / 6)
    assert metrics[("overall", "correct_images")] == pytest.approx(4 / 7)
    assert metrics[("overall", "correct_prompts")] == pytest.approx(3 / 6)
    assert metrics[("single_object", "correct")] == 1.0


def test_generated_prompts_and_tiny_owl_end_to_end(tmp_path):
    suite = load_suite("geneval", REAL, detector=_tiny_owl(tmp_path), color_classifier=oracle_classifier())
    test, train = suite.items("test"), suite.items("train")
    assert len(test) == 553 and train and not {i.prompt for i in test} & {i.prompt for i in train}
    picks = [next(it for it in test if it.task == t) for t in ("single_object", "counting")]
    scores = suite.score(torch.rand(2, 3, 32, 32), picks)
    assert all(s["correct"] in (0.0, 1.0) for s in scores)
    assert WorldDetector().detect(torch.full((1, 3, 16, 16), 0.5)) == [[]]

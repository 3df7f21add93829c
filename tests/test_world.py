"""The embedded world: exact flow, a renderer whose failures are visible, a detector with GenEval's rules."""

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.scoring.geneval import Detection, evaluate_detections, relative_position
from jsbench.schedule import uniform_sigmas
from jsbench.world.detect import detect
from jsbench.world.mixture import MixtureTable, PromptMixture, euler_flow
from jsbench.world.render import render_scenes
from jsbench.world.scenes import SHAPE_ANCHORS, encode_arrangement, make_prompts, scene_mixture, split_prompts


def test_many_step_flow_samples_the_mixture():
    # two modes with weights 0.25 / 0.75: 200 Euler steps of the exact velocity land on them in
    # those proportions, with the components' own spread
    means = torch.tensor([[-2.0, 0.0], [2.0, 1.0]], dtype=torch.float64)
    mix = PromptMixture(means, torch.log(torch.tensor([0.25, 0.75], dtype=torch.float64)), torch.tensor([[0.1, 0.2], [0.1, 0.2]], dtype=torch.float64))
    table = MixtureTable([mix], dtype=torch.float64)
    n = 20000
    x = torch.randn(n, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = euler_flow(table, x, torch.zeros(n, dtype=torch.long), uniform_sigmas(200, n, torch.float64))
    right = out[:, 0] > 0
    assert abs(right.double().mean().item() - 0.75) < 0.015
    assert abs(out[right, 0].std().item() - 0.1) < 0.01
    assert abs(out[right, 1].std().item() - 0.2) < 0.015
    assert abs(out[right, 1].mean().item() - 1.0) < 0.01


def test_one_step_lands_on_the_mixture_mean():
    # the first Euler step from pure noise lands on E[x0] = the average of all modes: a blend
    means = torch.tensor([[-1.0], [1.0]], dtype=torch.float64)
    table = MixtureTable([PromptMixture(means, torch.zeros(2, dtype=torch.float64), 0.05)], dtype=torch.float64)
    x = torch.randn(100, 1, dtype=torch.float64)
    out = euler_flow(table, x, torch.zeros(100, dtype=torch.long), uniform_sigmas(1, 100, torch.float64))
    assert torch.allclose(out, torch.zeros_like(out), atol=1e-9)


@pytest.mark.slow  # renders every mode of every prompt
def test_every_mode_of_every_prompt_is_judged_correct():
    # the modes themselves are valid images: the detector + GenEval rules accept all of them
    prompts = make_prompts()[::3]
    for meta in prompts:
        images = render_scenes(scene_mixture(meta).means.float())
        for dets in detect(images):
            ok, why = evaluate_detections(dets, meta)
            assert ok, f"{meta['prompt']}: {why}"


def _one(cls, color, x, y, presence=1.0, shape_shift=0.0):
    lat = encode_arrangement([(0, cls, color, x, y)]).float()
    lat[0] = presence
    lat[4] += shape_shift
    return lat


def test_failures_look_like_a_real_sampler_failing():
    ghost, solid = detect(render_scenes(torch.stack([_one("circle", "red", 0, 0, presence=0.0), _one("circle", "red", 0, 0)])))
    assert ghost and ghost[0].confidence < 0.9  # a faint object: fails counting's 0.9 threshold
    assert solid[0].confidence > 0.95 and solid[0].label == "circle" and solid[0].color == "red"
    # a shape stranded between circle and square is no longer read as what the prompt asked
    halfway = float(SHAPE_ANCHORS[2] - SHAPE_ANCHORS[1]) / 2
    half = detect(render_scenes(_one("circle", "red", 0, 0, shape_shift=halfway)[None]))[0]
    assert half[0].label != "circle"
    # two touching objects merge into one detection
    merged = encode_arrangement([(0, "circle", "red", 0.0, 0.0), (1, "circle", "red", 0.3, 0.0)]).float()
    assert len(detect(render_scenes(merged[None]))[0]) == 1
    # an off-palette colour between red and blue is neither
    off = _one("square", "red", 0, 0)
    off[3] = 0.5 * (off[3] + encode_arrangement([(0, "square", "blue", 0, 0)])[3])
    assert detect(render_scenes(off[None]))[0][0].color not in ("red", "blue")


def test_geneval_rules():
    box = lambda x0, y0: (x0, y0, x0 + 10, y0 + 10)
    assert relative_position(box(0, 0), box(30, 0)) == {"left of"}
    assert relative_position(box(0, 30), box(0, 0)) == {"below"}
    assert relative_position(box(0, 0), box(1, 1)) == set()  # within the 0.1*(wA+wB) margin
    meta = {"tag": "counting", "include": [{"class": "circle", "count": 2}], "exclude": [{"class": "circle", "count": 3}]}
    two = [Detection("circle", box(0, 0), 0.95), Detection("circle", box(30, 0), 0.95)]
    assert evaluate_detections(two, meta)[0]
    assert not evaluate_detections(two + [Detection("circle", box(60, 0), 0.95)], meta)[0]
    # counting uses the 0.9 threshold: a 0.5-confidence third object does not count
    assert evaluate_detections(two + [Detection("circle", box(60, 0), 0.5)], meta)[0]
    pos = {"tag": "position", "include": [{"class": "square", "count": 1}, {"class": "circle", "count": 1, "position": ["left of", 0]}]}
    assert evaluate_detections([Detection("square", box(30, 0), 1), Detection("circle", box(0, 0), 1)], pos)[0]
    assert not evaluate_detections([Detection("square", box(0, 0), 1), Detection("circle", box(30, 0), 1)], pos)[0]
    col = {"tag": "colors", "include": [{"class": "ring", "count": 1, "color": "blue"}]}
    assert not evaluate_detections([Detection("ring", box(0, 0), 1, "red")], col)[0]


def test_split_is_stratified_and_disjoint():
    prompts = make_prompts()
    train, test = split_prompts(prompts, "train"), split_prompts(prompts, "test")
    assert not {p["prompt"] for p in train} & {p["prompt"] for p in test}
    assert len(train) + len(test) == len(prompts)
    assert {p["tag"] for p in test} == {p["tag"] for p in prompts}


def test_split_holds_out_at_least_eight_prompts_per_task_and_no_rule_on_both_sides():
    from collections import Counter

    from jsbench.world.scenes import MIN_HELD_OUT, prompt_rule

    prompts = make_prompts()
    train, test = split_prompts(prompts, "train"), split_prompts(prompts, "test")
    n_test, n_train = Counter(p["tag"] for p in test), Counter(p["tag"] for p in train)
    for tag in {p["tag"] for p in prompts}:
        assert n_test[tag] >= MIN_HELD_OUT and n_train[tag] >= 1, (tag, n_test[tag], n_train[tag])
    # all wordings of a rule sit on one side: nothing held out is ever trained on under another wording
    assert not {prompt_rule(p) for p in train} & {prompt_rule(p) for p in test}
    assert len({p["prompt"] for p in prompts}) == len(prompts)
    # deterministic, and independent of the order the prompts come in
    assert [p["prompt"] for p in split_prompts(prompts[::-1], "test")] == [p["prompt"] for p in test][::-1]
    # the large tasks keep their every-4th split
    assert (n_test["colors"], n_test["position"], n_test["color_attr"]) == (10, 12, 25)


@pytest.mark.xfail(strict=True, reason="known leak: prompt_rule keeps the order of a two-object prompt's include groups, "
                   "which GenEval ANDs, so 3 training prompts ask for a held-out prompt's rule in the other order; "
                   "grouping by rules_key changes the held-out split, so the shipped policies, leaderboards and "
                   "calibrations must be regenerated with the fix")
def test_no_training_prompt_asks_for_a_held_out_rule_in_another_order():
    from jsbench.scoring.geneval_prompts import rules_key

    prompts = make_prompts()
    held = {rules_key(p) for p in split_prompts(prompts, "test")}
    assert [p["prompt"] for p in split_prompts(prompts, "train") if rules_key(p) in held] == []


def _score(backbone, metas, sigmas_fn, seeds):
    prompts = [m["prompt"] for m in metas for _ in seeds]
    rows = [m for m in metas for _ in seeds]
    x = backbone.initial_noise([s for _ in metas for s in seeds])
    images = backbone.sample(x, backbone.encode(prompts), sigmas_fn(len(prompts)))
    return sum(evaluate_detections(d, m)[0] for d, m in zip(detect(images), rows)) / len(rows)


@pytest.mark.slow
def test_calibration_ceiling_and_default_failure_rate():
    """(a) the 200-step ceiling is >= 0.97; (b) the default 3-step schedule fails >= 25% of the time."""
    bb = load_backbone("analytic")
    metas = split_prompts(make_prompts(), "test")
    seeds = range(500, 506)
    ceiling = _score(bb, metas, lambda n: bb.default_sigmas(200, torch.zeros(n, 1)), seeds)
    default3 = _score(bb, metas, lambda n: bb.default_sigmas(3, torch.zeros(n, 1)), seeds)
    assert ceiling >= 0.97, ceiling
    assert 1 - default3 >= 0.25, default3

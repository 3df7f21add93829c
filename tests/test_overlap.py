"""The split overlap: held-out prompts a training prompt asks the same of, and its effect on a Δ."""

from jsbench.analysis.overlap import equivalent_pairs, overlap_effect, requirement


def test_equivalent_wordings_have_one_requirement():
    assert requirement("a photo of a circle left of a triangle") == requirement("a photo of a triangle right of a circle")
    assert requirement("a photo of a ring above a square") == requirement("a photo of a square below a ring")
    assert requirement("a photo of a green circle and a brown square") == requirement("a photo of a brown square and a green circle")
    assert requirement("a photo of a circle left of a triangle") != requirement("a photo of a triangle left of a circle")
    assert requirement("a photo of a green circle and a brown square") != requirement("a photo of a brown circle and a green square")
    assert requirement("a photo of a ring left of a square with stripes") != requirement("a photo of a square right of a ring")


def test_pairs_and_the_effect_on_a_delta():
    train = ["a photo of a triangle right of a circle", "a photo of two rings"]
    test = ["a photo of a circle left of a triangle", "a photo of a square", "a photo of two rings"]
    assert equivalent_pairs(train, test) == [("a photo of a circle left of a triangle", "a photo of a triangle right of a circle")]

    def line(method, scores):
        return {"backbone": "w", "steps": 3, "method": method, "seeds": [0, 1], "prompts": test,
                "tasks": ["position", "single_object", "counting"], "scores": scores}

    # default fails everything; the row passes the overlapping prompt's images and one image elsewhere
    rows = overlap_effect([line("default", [0.0] * 6), line("js", [1.0, 1.0, 1.0, 0.0, 0.0, 0.0])],
                          {"a photo of a circle left of a triangle"})
    assert len(rows) == 1
    r = rows[0]
    assert abs(r["delta"] - (1.0 + 0.5 + 0.0) / 3) < 1e-12  # mean of the task means
    assert abs(r["delta_without_overlap"] - (0.5 + 0.0) / 2) < 1e-12  # the position task is gone
    assert abs(r["change"] - (0.25 - 0.5)) < 1e-12

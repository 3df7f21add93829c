"""instance_headroom: oss-image − oss, the learned policy's gain over global, and the share, from per-image
scores; hand-computed on a tiny scores file."""

from __future__ import annotations

import json

import pytest

from jsbench.analysis.instance_headroom import HeadroomError, headroom_sections, instance_headroom


def _entry(method, scores, steps=3, seeds=(0, 1)):
    # two tasks: prompts p0, p1 in task a; p2 in task b; two seeds each (scores prompt-major)
    return {"backbone": "w", "model_id": "m", "steps": steps, "method": method, "metric": "correct",
            "prompts": ["p0", "p1", "p2"], "tasks": ["a", "a", "b"], "seeds": list(seeds), "scores": scores, "values": {}}


def _write(path, entries):
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def test_headroom_gain_and_share_by_hand(tmp_path):
    path = _write(tmp_path / "s.jsonl", [
        _entry("oss", [0, 0, 0, 1, 1, 1]),
        _entry("oss-image", [1, 1, 1, 1, 1, 1]),    # per prompt +1, +0.5, 0 -> task a +0.75, b 0 -> overall 0.375
        _entry("global", [0, 0, 0, 0, 0, 0]),
        _entry("js", [1, 0, 0, 0, 0, 0]),           # per prompt +0.5, 0, 0 -> task a 0.25, b 0 -> overall 0.125
        _entry("oss", [0] * 6, steps=5),
    ])
    assert headroom_sections(path) == [("w", 3)]
    r = instance_headroom(path, "w", 3, bootstrap=400)
    assert r["headroom"]["value"] == pytest.approx(0.375)
    assert r["gain"]["value"] == pytest.approx(0.125)
    assert r["share"]["value"] == pytest.approx(1 / 3)
    assert r["headroom"]["se"] > 0 and r["headroom"]["ci95"][0] <= 0.375 <= r["headroom"]["ci95"][1]
    # task b has one prompt: resampling within tasks never moves its (zero) contribution
    assert r["headroom"]["ci95"][1] <= 0.5 + 1e-12
    assert r["share"]["ci95"][0] <= 1 / 3 <= r["share"]["ci95"][1]


def test_no_share_without_headroom(tmp_path):
    path = _write(tmp_path / "s.jsonl", [_entry("oss", [1] * 6), _entry("oss-image", [1, 1, 0, 1, 1, 1]),
                                         _entry("global", [0] * 6), _entry("js", [1, 0, 0, 0, 0, 0])])
    r = instance_headroom(path, "w", 3, bootstrap=200)
    assert r["headroom"]["value"] < 0 and r["share"] is None


def test_refuses_missing_rows_and_unpaired_rows(tmp_path):
    path = _write(tmp_path / "s.jsonl", [_entry("oss", [0] * 6), _entry("oss-image", [0] * 6), _entry("global", [0] * 6)])
    with pytest.raises(HeadroomError, match="no js row"):
        instance_headroom(path, "w", 3)
    path = _write(tmp_path / "t.jsonl", [_entry("oss", [0] * 6), _entry("oss-image", [0] * 6), _entry("global", [0] * 6),
                                         _entry("js", [0] * 6, seeds=(5, 6))])
    with pytest.raises(HeadroomError, match="other prompts or seeds"):
        instance_headroom(path, "w", 3)


def test_gain_se_counts_training_seeds(tmp_path):
    """A learned row's scores are seed means: the leaderboard's seed-inclusive SE floors the gain's, and the
    share's interval widens with it; a smaller floor changes nothing."""
    entries = [_entry("oss", [0, 0, 0, 1, 1, 1]), _entry("oss-image", [1, 1, 1, 1, 1, 1]),
               _entry("global", [0, 0, 0, 0, 0, 0]), _entry("js", [1, 0, 0, 0, 0, 0])]
    path = _write(tmp_path / "s.jsonl", entries)
    plain = instance_headroom(path, "w", 3, bootstrap=2000)
    wide = instance_headroom(path, "w", 3, bootstrap=2000, gain_se=0.3)
    assert wide["gain"]["value"] == plain["gain"]["value"]
    assert wide["gain"]["se"] == pytest.approx(0.3, rel=0.1) and plain["gain"]["se"] < 0.2
    assert wide["headroom"] == plain["headroom"]
    assert wide["share"]["ci95"][1] - wide["share"]["ci95"][0] > plain["share"]["ci95"][1] - plain["share"]["ci95"][0]
    assert instance_headroom(path, "w", 3, bootstrap=2000, gain_se=1e-6)["gain"] == plain["gain"]


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_a_floored_gain_is_t_distributed_at_the_leaderboards_df(tmp_path):
    """Three training seeds leave the gain's SE with few df: its draws are t_df times that SE, so its 95 %
    interval is about -+ t_{0.975, df} SE (4.30 at df 2), not -+ 1.96 SE, and the share's widens with it."""
    from jsbench.stats import t_quantile

    entries = [_entry("oss", [0, 0, 0, 1, 1, 1]), _entry("oss-image", [1, 1, 1, 1, 1, 1]),
               _entry("global", [0, 0, 0, 0, 0, 0]), _entry("js", [1, 0, 0, 0, 0, 0])]
    path = _write(tmp_path / "s.jsonl", entries)
    normal = instance_headroom(path, "w", 3, bootstrap=20000, gain_se=0.3)
    t2 = instance_headroom(path, "w", 3, bootstrap=20000, gain_se=0.3, gain_df=2)
    assert t2["gain_df"] == 2 and normal["gain_df"] is None and t2["gain"]["se"] == 0.3
    half = (t2["gain"]["ci95"][1] - t2["gain"]["ci95"][0]) / 2
    assert half == pytest.approx(t_quantile(0.975, 2) * 0.3, rel=0.1)
    assert (normal["gain"]["ci95"][1] - normal["gain"]["ci95"][0]) / 2 == pytest.approx(1.96 * 0.3, rel=0.1)
    assert t2["share"]["ci95"][1] - t2["share"]["ci95"][0] > normal["share"]["ci95"][1] - normal["share"]["ci95"][0]


def test_leaderboard_gain_se_reads_the_overall_row(tmp_path):
    from jsbench.analysis.instance_headroom import leaderboard_gain, leaderboard_gain_se

    csv = tmp_path / "geneval.csv"
    csv.write_text("backbone,model_id,steps,method,task,value,delta_global_stderr\n"
                   "w,m,3,js,overall,0.5,0.056\nw,m,3,js,colors,0.5,0.2\nw,m,5,js,overall,0.5,\nw,m,3,global,overall,0.5,\n")
    assert leaderboard_gain_se(csv, "w", 3) == pytest.approx(0.056)
    assert leaderboard_gain(csv, "w", 3) == pytest.approx((0.056, None))  # a CSV before the df columns
    with_df = tmp_path / "with_df.csv"
    with_df.write_text("backbone,model_id,steps,method,task,value,delta_global_stderr,delta_global_df\nw,m,3,js,overall,0.5,0.056,2.8\n")
    assert leaderboard_gain(with_df, "w", 3) == pytest.approx((0.056, 2.8))
    assert leaderboard_gain_se(csv, "w", 5) is None
    assert leaderboard_gain_se(csv, "w", 3, global_row="searched") is None
    assert leaderboard_gain_se(tmp_path / "none.csv", "w", 3) is None
    csv.write_text("backbone,model_id,steps,method,task,value,delta_global_stderr\nw,m,3,js,overall,0.5,nan\n")
    assert leaderboard_gain_se(csv, "w", 3) is None  # not a finite number: no floor
    scores = tmp_path / "s.jsonl"
    scores.write_text('{"backbone": "w"}\n')
    with pytest.raises(HeadroomError, match="not a leaderboard CSV"):
        leaderboard_gain_se(scores, "w", 3)

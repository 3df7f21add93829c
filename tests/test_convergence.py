"""The held-out convergence rule (jsbench.policy.convergence): known answers, error rates on simulated curves, rows
of several seeds, and re-stamping a manifest without touching its other keys."""

import json
import math

import numpy as np
import pytest

from jsbench.policy import convergence as cv

ITERS = [20 * k for k in range(21)]


def _curve(scores):
    return list(zip(ITERS, scores))


def test_known_answers():
    flat = cv.curve_convergence(_curve([0.3] + [0.7] * 20))
    assert flat["converged"] is True and flat["rise"] == 0 and flat["se"] < 1e-12 and flat["iterations"] == ITERS[10:]
    # a straight line rising 0.02 per point: 0.1 per quarter of training (5 points), no noise
    line = cv.curve_convergence(_curve([0.5 + 0.02 * k for k in range(21)]))
    assert line["converged"] is False and line["rise"] == pytest.approx(0.1) and line["df"] == 9
    assert line["direction"] == "rising" and flat["direction"] == "flat"
    # a score still falling has not settled either: not converged, marked as a fall
    fall = cv.curve_convergence(_curve([0.9 - 0.02 * k for k in range(21)]))
    assert fall["converged"] is False and fall["fell"] is True and fall["direction"] == "falling"
    # a fall within the margin is converged
    assert cv.curve_convergence(_curve([0.5 - 0.0015 * k for k in range(21)]))["converged"] is True
    # a rise within the margin is converged however precise
    assert cv.curve_convergence(_curve([0.5 + 0.0015 * k for k in range(21)]))["converged"] is True
    assert cv.curve_convergence(None)["converged"] is None and "no heldout.jsonl" in cv.curve_convergence(None)["reason"]
    assert cv.curve_convergence([(0, 0.1), (1, 0.2)])["converged"] is None  # too short to say


def test_the_se_allows_for_autocorrelation():
    """The same residual sizes, alternating (independent-looking) or in slow waves: the waves get the larger SE."""
    base = [0.7 + 0.01 * k for k in range(21)]
    jagged = [b + (0.02 if k % 2 else -0.02) for k, b in enumerate(base)]
    wavy = [b + 0.02 * math.sin(k / 2.0) for k, b in enumerate(base)]
    a, b = cv.curve_convergence(_curve(jagged)), cv.curve_convergence(_curve(wavy))
    assert a["phi"] == 0 and b["phi"] > 0.5 and b["se"] > a["se"]


def test_error_rates_on_simulated_curves():
    """Flat curves (AR(1) wander phi up to 0.6, SD up to 0.03, 64 binary images fixed across points) are flagged
    <= 10 % of the time, curves still rising by 0.15 per quarter of training >= 90 %; rows of 8 seeds rising
    by 0.05 >= 90 %, flat rows <= 10 %. 150 runs a setting (the full table: scripts/bench_convergence.py)."""
    res = cv.flag_rates(seed=1, trials=150, wander_sds=(0.01, 0.03), phis=(0.0, 0.6), rises=(0.0, 0.15), row_rises=(0.0, 0.05))
    for r in res["runs"] + res["rows"]:
        if r["rise"] == 0:
            assert r["flagged"] <= 0.10, r
        else:
            assert r["flagged"] >= 0.90, r


def test_row_verdict_from_the_seed_averaged_curve():
    rng = np.random.default_rng(5)
    flat = [cv.simulate_curve(rng, wander_sd=0.02, phi=0.6) for _ in range(8)]
    row = cv.row_convergence(flat)
    assert row["converged"] is True and row["seeds"] == 8 and row["df"] == 7 and row["se_from"] == "spread of the seeds' rises"
    # its rise is the rise of the averaged curve, which is the mean of the seeds' rises
    assert row["rise"] == pytest.approx(sum(row["seed_rises"]) / 8, abs=1e-9)
    rising = [cv.simulate_curve(rng, wander_sd=0.02, phi=0.6, rise=0.1) for _ in range(8)]
    assert cv.row_convergence(rising)["converged"] is False
    # a seed without a curve: the row is not judged, whatever the others say
    assert cv.row_convergence(rising[:7] + [None])["converged"] is None
    # two seeds: the averaged curve judged as one run
    two = cv.row_convergence(rising[:2])
    assert two["seeds"] == 2 and "autocorrelation" in two["se_from"] and two["converged"] is False
    # seeds at different iterations are not averaged
    assert cv.row_convergence([flat[0], [(k + 1, s) for k, s in flat[1]], flat[2]])["converged"] is None


def _run(folder, scores, manifest_extra=None):
    folder.mkdir(parents=True)
    (folder / "heldout.jsonl").write_text("".join(json.dumps({"iteration": k, "score": s, "scores": [s], "seconds": 0.1}) + "\n"
                                                  for k, s in _curve(scores)))
    manifest = {"checksum": "abc", "convergence": {"converged": True, "delta": 0.0, "se": 0.1, "rule": "training reward: old"},
                "train": {"iters": 400, "seed": 0}, "x": [1.5, 0.1 + 0.2], **(manifest_extra or {})}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def test_restamp_rewrites_only_the_convergence_field(tmp_path, capsys):
    rising = [0.5 + 0.02 * k for k in range(21)]
    before = _run(tmp_path / "row" / "seed0", rising)
    _run(tmp_path / "row" / "seed1", [0.7] * 21)
    old = tmp_path / "row" / "seed2"
    _run(old, [0.7] * 21)
    (old / "heldout.jsonl").unlink()  # an older run
    assert cv.main(["restamp", str(tmp_path), "--check"]) == 1  # would change: nothing written
    assert json.loads((tmp_path / "row" / "seed0" / "manifest.json").read_text()) == before
    assert cv.main(["restamp", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "seed0: NOT converged" in out and "seed1: converged" in out and "seed2: not judged" in out
    after = json.loads((tmp_path / "row" / "seed0" / "manifest.json").read_text())
    assert {k: v for k, v in after.items() if k != "convergence"} == {k: v for k, v in before.items() if k != "convergence"}
    assert after["convergence"] == cv.run_convergence(tmp_path / "row" / "seed0") and after["convergence"]["converged"] is False
    text = (tmp_path / "row" / "seed0" / "manifest.json").read_text()
    assert text == json.dumps(after, indent=2, sort_keys=True) + "\n"
    assert cv.main(["restamp", str(tmp_path), "--check"]) == 0  # idempotent
    assert cv.row_verdict(tmp_path / "row")["converged"] is None  # seed2 has no curve
    # a manifest not written as jsbench writes them is refused, not reformatted
    (old / "manifest.json").write_text(json.dumps(before))
    with pytest.raises(cv.ConvergenceError, match="not rewritten"):
        cv.restamp(old / "manifest.json")


def test_row_prints_the_verdict_of_the_seeds_averaged_curve(tmp_path, capsys):
    for s in range(3):  # rising by 0.02 a point (0.1 a quarter of the 21-point curve) with a seed offset
        _run(tmp_path / "rising" / f"seed{s}", [0.5 + 0.01 * s + 0.02 * k for k in range(21)])
        _run(tmp_path / "flat" / f"seed{s}", [0.7 + (0.01 if (k + s) % 2 else -0.01) for k in range(21)])
    assert cv.main(["row", str(tmp_path / "rising"), str(tmp_path / "flat"), "--curve"]) == 0
    out = capsys.readouterr().out.splitlines()
    rising = cv.row_verdict(tmp_path / "rising")
    assert out[0].startswith(f"{tmp_path / 'rising'}: NOT converged (rising), 3 seeds, held-out rise {rising['rise']:+.4f}")
    assert out[1:22] == [f"  {20 * k}\t{0.51 + 0.02 * k:.4f}" for k in range(21)]  # the seeds' mean
    assert out[22].startswith(f"{tmp_path / 'flat'}: converged (flat), 3 seeds")
    assert cv.main(["row", str(tmp_path / "absent")]) == 2  # no training run: refused, nothing printed to stdout
    assert capsys.readouterr().out == ""

"""The command line: refusals are one clear line with a non-zero exit; the main commands work end to end."""

import csv
import json

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.policy.schedule_policy import make_policy


def assert_one_line_error(result, *fragments):
    code, out, err = result
    assert code != 0
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "Traceback" not in err and "Traceback" not in out
    text = " ".join(lines)
    for frag in fragments:
        assert frag in text, text
    return text


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["eval", "--backbone", "sdxxl"], ["unknown backbone 'sdxxl'", "analytic"]),
        (["eval", "--suite", "genevil"], ["unknown suite 'genevil'", "geneval"]),
        (["eval", "--schedule", "magic"], ["unknown schedule 'magic'"]),
        (["eval", "--schedule", "policy:nowhere"], ["no policy at nowhere"]),
        (["eval", "--steps", "0"], ["steps"]),
        (["train", "--out", "p", "--reward", "beauty"], ["unknown reward 'beauty'"]),
        (["train", "--out", "p", "--baseline", "ppo"], ["unknown baseline", "ppo"]),
        (["train", "--out", "p", "--baseline", "rloo", "-K", "1"], ["K"]),
        (["train", "--out", "p", "--baseline", "js", "-B", "2"], ["B"]),
        (["train", "--out", "p", "--steps", "0"], ["steps"]),
        (["train", "--out", "p", "--steps", "5000"], ["steps"]),
        (["train", "--out", "p", "--resume"], ["nothing to resume"]),
    ],
)
def test_bad_input_is_one_line_and_nonzero(cli, args, fragments):
    assert_one_line_error(cli(*args), *fragments)


def test_policy_for_another_budget_or_corrupted_is_refused(cli, tmp_path):
    bb = load_backbone("analytic")
    make_policy(bb, 3, "global").save(tmp_path / "pol", {"backbone": "analytic"})
    assert_one_line_error(cli("eval", "--steps", "5", "--schedule", f"policy:{tmp_path / 'pol'}"), "trained for 3 steps, not 5")
    weights = tmp_path / "pol" / "policy.safetensors"
    weights.write_bytes(b"garbage" + weights.read_bytes()[7:])
    assert_one_line_error(cli("eval", "--steps", "3", "--schedule", f"policy:{tmp_path / 'pol'}"), "corrupt")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoint.pt").write_bytes(b"\x80\x02 truncated")  # protocol 2, torch.load's own
    assert_one_line_error(cli("train", "--out", tmp_path / "run", "--steps", "3", "--resume"), "corrupt")


def test_eval_appends_records(cli, tmp_path):
    out = tmp_path / "rec.jsonl"
    code, stdout, err = cli("eval", "--steps", "3", "--seeds", "1", "--out", out, "--no-progress")
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    tasks = {r["task"] for r in records}
    assert tasks == {"single_object", "two_object", "counting", "colors", "position", "color_attr", "overall"}
    overall = next(r for r in records if r["task"] == "overall")
    assert overall["method"] == "default" and overall["steps"] == 3 and overall["n_images"] == len(records[0]["seeds"]) * overall["n_prompts"]
    assert 0.0 <= overall["value"] <= 1.0 and overall["jsbench_version"]
    # the same command gives the same numbers
    cli("eval", "--steps", "3", "--seeds", "1", "--out", out, "--no-progress")
    again = [json.loads(line) for line in out.read_text().splitlines()][len(records) :]
    assert [r["value"] for r in again] == [r["value"] for r in records]


def _ship(tmp_path, steps, shift_bias):
    """A 'shipped' global policy whose schedule is pushed away from the default by shift_bias."""
    bb = load_backbone("analytic")
    policy = make_policy(bb, steps, "global")
    with torch.no_grad():
        policy.delta.copy_(torch.linspace(-shift_bias, shift_bias, steps))
    return policy.save(tmp_path / "policies" / "analytic" / f"global-n{steps}", {"backbone": "analytic", "baseline": "js", "reward": "geneval"})


@pytest.mark.slow  # three compares with figures
def test_compare_writes_leaderboard_and_check_catches_a_worse_policy(cli, tmp_path):
    _ship(tmp_path, 3, -1.0)  # front-loaded steps: far better than the default at 3 steps
    args = ["compare", "--steps", "3", "--seeds", "2", "--policies", tmp_path / "policies", "--records", tmp_path / "rec.jsonl", "--leaderboards", tmp_path / "lb", "--no-progress",
            "--zoo", "none"]  # the zoo's rows have their own tests
    code, out, err = cli(*args)
    assert code == 0, err
    md = (tmp_path / "lb" / "geneval.md").read_text()
    rows = list(csv.DictReader(open(tmp_path / "lb" / "geneval.csv")))
    methods = {r["method"] for r in rows}
    assert {"default", "global", "ceiling (200 steps)"} <= methods
    assert "| global | 3 |" in md and "jsbench compare" in md
    overall = {r["method"]: float(r["value"]) for r in rows if r["task"] == "overall"}
    assert overall["global"] > overall["default"]
    for fig in ("schedules", "images"):
        assert f"figures/geneval-analytic-n3-{fig}.png" in md
        assert (tmp_path / "lb" / "figures" / f"geneval-analytic-n3-{fig}.png").stat().st_size > 1000
    # re-running the check against what was just written passes ...
    code, out, err = cli(*args, "--check")
    assert code == 0, err
    assert "nothing regressed" in out
    # ... and a deliberately worse policy under the same name fails it (exit 1), with a table of what regressed
    _ship(tmp_path, 3, 1.5)
    code, out, err = cli(*args, "--check")
    assert code == 1, err
    assert "regressed" in out and "global" in out


def test_policies_list_show_and_schedules_plot(cli, tmp_path):
    path = _ship(tmp_path, 3, -1.0)
    code, out, err = cli("policies", "list", "--root", tmp_path / "policies")
    assert code == 0 and "global-n3" in out and "analytic" in out
    code, out, err = cli("policies", "show", path)
    assert code == 0 and '"checksum"' in out
    code, out, err = cli("schedules", "plot", "--steps", "3", "--schedule", "default", "--schedule", f"policy:{path}", "--seeds", "2", "--out", tmp_path / "figs")
    assert code == 0, err
    assert (tmp_path / "figs" / "schedules.png").stat().st_size > 1000 and (tmp_path / "figs" / "images.png").exists()

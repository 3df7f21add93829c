"""The schedule zoo: diffusers' sigma families at parity with the schedulers, AYS, OSS, the searched
schedule and schedule files; every source valid by construction."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

from jsbench.backbones import load_backbone  # noqa: E402
from jsbench.schedule import (  # noqa: E402
    ScheduleError,
    beta_levels,
    check_sigmas,
    exponential_levels,
    karras_levels,
    loglinear_interp,
)
from jsbench.zoo import (  # noqa: E402
    ZooError,
    ays_sigmas,
    family_sigmas,
    oss_mean_search,
    oss_sigmas,
    read_schedule_file,
    searched_sigmas,
    zoo_source_row,
)

FLAGS = {"karras": "use_karras_sigmas", "exponential": "use_exponential_sigmas", "beta": "use_beta_sigmas"}


@pytest.fixture(scope="module")
def analytic():
    return load_backbone("analytic")


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("JSBENCH_SCHEDULES", str(tmp_path / "schedules"))


# ---- families: parity with diffusers' schedulers ---------------------------------------------------


@pytest.mark.parametrize("family", list(FLAGS))
@pytest.mark.parametrize("steps", [1, 2, 3, 5, 28])
def test_families_match_flux_scheduler_on_analytic(analytic, family, steps):
    """analytic's default is Flux's (linspace(1, 1/N, N) under the exponential shift, mu = 0.5)."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    sch = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, **{FLAGS[family]: True})
    sch.set_timesteps(sigmas=np.linspace(1.0, 1 / steps, steps), mu=analytic.default_mu)
    row, _ = family_sigmas(analytic, family, steps)
    torch.testing.assert_close(row, sch.sigmas.float(), atol=1e-6, rtol=0)


def _flow_reference(bb, family, steps):
    from diffusers import FlowMatchEulerDiscreteScheduler

    sch = FlowMatchEulerDiscreteScheduler.from_config(bb.pipe.scheduler.config, **{FLAGS[family]: True})
    bb._set_default_timesteps(sch, steps, bb._mu())  # exactly what the pipeline does for N steps
    return sch.sigmas.float()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sd35", "flux-dev", "flux-schnell", "scenes-dit"])
@pytest.mark.parametrize("family", list(FLAGS))
def test_families_match_flow_match_scheduler(kind, family):
    if kind == "scenes-dit":
        bb = _scenes_dit()
    else:
        from tiny_pipelines import tiny_backbone

        bb = tiny_backbone(kind)
    for steps in (1, 3, 4, 10):
        row, _ = family_sigmas(bb, family, steps)
        torch.testing.assert_close(row.cpu(), _flow_reference(bb, family, steps), atol=1e-6, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FLAGS))
def test_families_match_euler_discrete_scheduler_on_sdxl(family):
    """SD-XL: the family is spread in VE sigma between the pipeline's first and last levels; through the
    backbone's clock it gives back the scheduler's VE sigmas and UNet timesteps."""
    from diffusers import EulerDiscreteScheduler
    from tiny_pipelines import tiny_backbone

    from jsbench.backbones.sdxl_clock import timesteps_from_ve_sigmas

    bb = tiny_backbone("sdxl")
    for steps in (2, 4, 10, 25):
        sch = EulerDiscreteScheduler.from_config(bb.scheduler.config, **{FLAGS[family]: True})
        sch.set_timesteps(steps)
        row, _ = family_sigmas(bb, family, steps)
        ve = bb.ve_sigmas(row[None].to(bb.device))[0].cpu()
        torch.testing.assert_close(ve, sch.sigmas.float(), rtol=2e-5, atol=1e-7)
        taus = timesteps_from_ve_sigmas(ve[:-1], bb.table)
        torch.testing.assert_close(taus, sch.timesteps.float(), atol=2e-3, rtol=0)


# ---- families: properties ---------------------------------------------------------------------------

levels_args = st.tuples(
    st.floats(1e-4, 1e3), st.floats(1.0001, 1e3), st.integers(1, 200)
).map(lambda t: (t[0] * t[1], t[0], t[2]))  # (sigma_max, sigma_min, N) with max > min


@settings(max_examples=60, deadline=None)
@given(levels_args, st.floats(0.5, 20))
def test_level_formulas_run_from_max_to_min_strictly_decreasing(args, rho):
    hi, lo, n = args
    for levels in (karras_levels(hi, lo, n, rho), exponential_levels(hi, lo, n), beta_levels(hi, lo, n, 0.6, 0.6)):
        assert levels.shape == (n,)
        assert levels[0].item() == pytest.approx(hi, rel=1e-9)
        if n > 1:
            assert levels[-1].item() == pytest.approx(lo, rel=1e-9)
            assert (levels[1:] < levels[:-1]).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.sampled_from(["karras", "karras:3", "karras:12.5", "exponential", "beta", "beta:0.3,2", "beta:2,2"]))
def test_family_rows_are_valid_schedules(analytic, steps, spec):
    row, label = family_sigmas(analytic, spec, steps)
    assert row.shape == (steps + 1,) and row.dtype == torch.float32
    check_sigmas(row[None])
    assert label.split()[0] == spec.split(":")[0]


@pytest.mark.parametrize("spec", ["karras:0", "karras:x", "karras:-1", "beta:1", "beta:0,1", "beta:a,b", "exponential:2"])
def test_bad_family_parameters_are_refused(analytic, spec):
    with pytest.raises(ZooError, match="bad schedule"):
        family_sigmas(analytic, spec, 4)


def test_level_formulas_refuse_empty_ranges():
    with pytest.raises(ScheduleError):
        karras_levels(1.0, 1.0, 3)
    with pytest.raises(ScheduleError):
        exponential_levels(1.0, 0.0, 3)


# ---- ays ---------------------------------------------------------------------------------------------


def test_loglinear_interp_is_the_ays_recipe():
    levels = [14.6146412293, 6.3184485287, 3.7681790315, 2.1811480769, 1.3405244945, 0.8620721141, 0.5550693289,
              0.3798540708, 0.2332364134, 0.1114188177, 0.0291671582]
    torch.testing.assert_close(loglinear_interp(levels, 11), torch.tensor(levels, dtype=torch.float64))
    for n in (3, 5, 20):
        xs, ys = np.linspace(0, 1, len(levels)), np.log(levels[::-1])
        want = np.exp(np.interp(np.linspace(0, 1, n), xs, ys))[::-1]
        torch.testing.assert_close(loglinear_interp(levels, n), torch.tensor(want.copy()))


def test_ays_is_refused_in_one_line_where_the_family_has_none(analytic):
    with pytest.raises(ZooError, match=r"ays: diffusers' AysSchedules has no schedule for analytic") as exc:
        ays_sigmas(analytic, 5)
    assert "\n" not in str(exc.value)


@pytest.mark.slow
def test_ays_on_sdxl_runs_diffusers_levels():
    from diffusers.schedulers import AysSchedules
    from tiny_pipelines import tiny_backbone

    bb = tiny_backbone("sdxl")
    listed = torch.tensor(AysSchedules["StableDiffusionXLSigmas"], dtype=torch.float32)
    row = ays_sigmas(bb, 10)
    check_sigmas(row[None])
    ve = bb.ve_sigmas(row[None].to(bb.device))[0].cpu()
    # the first level is the pipeline's 10-step start; every later level is diffusers' own
    assert ve[0].item() == pytest.approx(bb.ve_start(10).item(), rel=1e-5)
    torch.testing.assert_close(ve[1:], listed[1:], rtol=2e-5, atol=1e-7)
    for steps in (5, 8, 20, 40):
        row = ays_sigmas(bb, steps)
        check_sigmas(row[None])
        levels = listed[:-1].double().tolist() + [float(bb.table[0])]
        want = loglinear_interp(levels, steps + 1)[1:-1].float()
        torch.testing.assert_close(bb.ve_sigmas(row[None].to(bb.device))[0, 1:-1].cpu(), want, rtol=2e-5, atol=1e-7)


# ---- file:PATH ---------------------------------------------------------------------------------------


def test_schedule_files_in_every_form(tmp_path):
    rows = {"a red cat": [1, 0.6, 0.25, 0], "two blue dogs, a car": [1.0, 0.9, 0.1, 0.0]}
    (tmp_path / "one.json").write_text("[1, 0.7, 0.3, 0]\n")
    (tmp_path / "per.json").write_text(json.dumps(rows, indent=2))
    (tmp_path / "one.csv").write_text("1,0.7,0.3,0\n")
    (tmp_path / "per.csv").write_text('prompt,s0,s1,s2,s3\na red cat,1,0.6,0.25,0\n"two blue dogs, a car",1,0.9,0.1,0\n')
    for name in ("one.json", "one.csv"):
        sf = read_schedule_file(tmp_path / name, 3)
        got = sf.rows_for(["x", "y"])
        torch.testing.assert_close(got, torch.tensor([[1, 0.7, 0.3, 0]] * 2, dtype=torch.float32))
    for name in ("per.json", "per.csv"):
        sf = read_schedule_file(tmp_path / name, 3)
        got = sf.rows_for(["two blue dogs, a car", "a red cat"])
        torch.testing.assert_close(got, torch.tensor([rows["two blue dogs, a car"], rows["a red cat"]], dtype=torch.float32))
        with pytest.raises(ZooError, match="no schedule for prompt 'a dog'"):
            sf.rows_for(["a dog"])


@pytest.mark.parametrize(
    "name, text, where, fragment",
    [
        ("bad.json", '[1, 0.5,\n 0.7, 0]', "bad.json:1", "sigma 2 (0.7) is not below sigma 1 (0.5)"),
        ("bad.json", '[1, 0.5,\n "x", 0]', "bad.json:2", "sigma 2 is 'x'"),
        ("bad.json", '[1, 0.5\n 0.2, 0]', "bad.json:2", "not valid JSON"),
        ("bad.json", '{\n "a red cat": [1, 0.5, 0],\n "a dog": [1, 0.6, 0.3, 0.1]\n}', "bad.json:2", "3 sigmas make 2 steps, but --steps is 3"),
        ("bad.json", '{\n "a red cat": [1, 0.5, 0.2, 0],\n "a dog": [1, 0.6, 0.3, 0.1]\n}', "bad.json:3", "the last sigma is 0.1"),
        ("bad.json", '{\n "a": [1, 0.5, 0.2, 0],\n "a": [1, 0.6, 0.3, 0]\n}', "bad.json:3", "repeats line 2"),
        ("bad.json", '{"a": 3}', "bad.json:1", "not a list of sigmas"),
        ("bad.json", '[[1, 0.5, 0.2, 0]]', "bad.json:1", "has no prompts"),
        ("bad.csv", "prompt,s0,s1,s2,s3\na,1,0.5,0.2,0\nb,0.9,0.5,0.2,0\n", "bad.csv:3", "the first sigma is 0.9"),
        ("bad.csv", "1,0.5,0.2,0\n1,0.6,0.2,0\n", "bad.csv:2", "a second schedule without a prompt"),
        ("bad.csv", "a,1,0.5,oops,0\n", "bad.csv:1", "column 4 ('oops') is not a number"),
        ("bad.csv", "1,0.5,0.5,0\n", "bad.csv:1", "sigma 2 (0.5) is not below sigma 1 (0.5)"),
        ("bad.csv", "1,0.5,nan,0\n", "bad.csv:1", "not a finite number"),
        ("bad.csv", "\n\n", "bad.csv", "empty"),
    ],
)
def test_bad_schedule_files_are_one_line_with_file_and_line(tmp_path, name, text, where, fragment):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ZooError) as exc:
        read_schedule_file(path, 3)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{tmp_path / where}"), msg
    assert fragment in msg, msg


def test_missing_schedule_file_is_refused(tmp_path):
    with pytest.raises(ZooError, match="not found"):
        read_schedule_file(tmp_path / "nope.json", 3)


sigma_rows = st.integers(1, 12).flatmap(
    lambda n: st.lists(st.floats(0.001, 1.0), min_size=n, max_size=n).map(
        lambda xs: [1.0] + [float(v) for v in (1.0 - torch.cumsum(torch.tensor(xs, dtype=torch.float64) / (sum(xs) + 1e-9 + max(xs) * 0.5), 0)).tolist()[:-1]] + [0.0]
    )
)


@settings(max_examples=40, deadline=None)
@given(sigma_rows, st.sampled_from(["json", "csv"]))
def test_valid_schedules_round_trip_through_files(tmp_path_factory, row, fmt):
    check_sigmas(torch.tensor([row], dtype=torch.float32))
    path = tmp_path_factory.mktemp("f") / f"s.{fmt}"
    path.write_text(json.dumps(row) if fmt == "json" else ",".join(repr(v) for v in row) + "\n")
    got = read_schedule_file(path, len(row) - 1).rows_for(["p"])[0]
    torch.testing.assert_close(got, torch.tensor(row, dtype=torch.float32))


# ---- oss -----------------------------------------------------------------------------------------------


def _small_batch(bb, prompts=3, seeds=(0, 1)):
    from jsbench.suites import load_suite

    items = load_suite("geneval", bb).items("train")[:prompts]
    rows = [(it.prompt, s) for it in items for s in seeds]
    return bb.encode([p for p, _ in rows]), bb.initial_noise([s for _, s in rows])


def _endpoint_mse(bb, cond, x_T, row, teacher_row):
    a = bb.sample_latents(x_T, cond, row.expand(x_T.shape[0], -1).contiguous())
    b = bb.sample_latents(x_T, cond, teacher_row.expand(x_T.shape[0], -1).contiguous())
    return float((a.double() - b.double()).pow(2).mean())


def test_oss_two_steps_is_the_brute_force_optimum(analytic):
    """With N = 2 the DP's recursion is exhaustive: its endpoint equals the best of all 2-step paths."""
    cond, x_T = _small_batch(analytic)
    teacher = analytic.default_sigmas(12, x_T)[0]
    row, cost = oss_mean_search(analytic, cond, x_T, 2, teacher)
    check_sigmas(row[None])
    assert set(row.tolist()) <= set(teacher.tolist())
    costs = {q: _endpoint_mse(analytic, cond, x_T, torch.stack([teacher[0], teacher[q], teacher[-1]]), teacher) for q in range(1, 12)}
    best = min(costs, key=costs.get)
    assert row[1].item() == teacher[best].item()
    assert cost == pytest.approx(costs[best], rel=1e-4, abs=1e-9)


def test_oss_calls_the_model_on_at_most_the_backbones_eval_batch(analytic, monkeypatch):
    """A backbone that declares how many rows fit (Flux: 8) is never sent more per velocity call."""
    cond, x_T = _small_batch(analytic)
    teacher = analytic.default_sigmas(8, x_T)[0]
    want, _ = oss_mean_search(analytic, cond, x_T, 3, teacher)
    rows, velocity = [], analytic.velocity
    monkeypatch.setattr(analytic, "eval_batch", 3)
    monkeypatch.setattr(analytic, "velocity", lambda x, s, c: rows.append(x.shape[0]) or velocity(x, s, c))
    got, _ = oss_mean_search(analytic, cond, x_T, 3, teacher)
    assert rows and max(rows) <= 3
    assert torch.equal(got, want)  # rows never interact: the batching changes memory, not the schedule


@pytest.mark.parametrize("steps", [1, 3, 5])
def test_oss_rows_are_teacher_subsets_and_beat_evenly_spaced_subsets(analytic, steps):
    cond, x_T = _small_batch(analytic)
    teacher = analytic.default_sigmas(20, x_T)[0]
    row, cost = oss_mean_search(analytic, cond, x_T, steps, teacher)
    check_sigmas(row[None])
    assert row.shape == (steps + 1,)
    assert set(row.tolist()) <= set(teacher.tolist())
    assert cost == pytest.approx(_endpoint_mse(analytic, cond, x_T, row, teacher), rel=1e-4, abs=1e-9)
    even = teacher[torch.linspace(0, 20, steps + 1).round().long()]
    assert cost <= _endpoint_mse(analytic, cond, x_T, even, teacher) * (1 + 1e-6)  # equal at N = 1 (one path)


def test_oss_is_cached_and_reused(analytic, monkeypatch):
    from jsbench import zoo
    from jsbench.zoo import oss as zoo_oss
    from jsbench.suites import load_suite

    suite = load_suite("geneval", analytic)
    first = oss_sigmas(analytic, suite, 3, teacher_steps=16, prompts=3, seeds=1)
    files = list(zoo.schedules_dir().glob("analytic/oss-geneval-n3.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["sigmas"] == first.tolist()

    def boom(*a, **k):
        raise AssertionError("recomputed although cached")

    monkeypatch.setattr(zoo_oss, "oss_paths", boom)
    torch.testing.assert_close(oss_sigmas(analytic, suite, 3, teacher_steps=16, prompts=3, seeds=1), first)
    with pytest.raises(AssertionError, match="recomputed"):  # another key (teacher) is a fresh computation
        oss_sigmas(analytic, suite, 3, teacher_steps=24, prompts=3, seeds=1)


def test_oss_needs_a_suite_and_a_flow_backbone(analytic):
    with pytest.raises(ZooError, match="training prompts"):
        zoo_source_row("oss", analytic, 3, suite=None)
    with pytest.raises(ZooError, match="oss:M"):
        zoo_source_row("oss:x", analytic, 3, suite=None)

    class NoVelocity:
        name = "other"
        velocity = None

    from jsbench.zoo.oss import velocity_fn as _velocity_fn

    with pytest.raises(ZooError, match="needs the velocity"):
        _velocity_fn(NoVelocity())
    assert _velocity_fn(analytic)[1] == torch.float64  # the embedded world samples in float64


# ---- searched ------------------------------------------------------------------------------------------


def test_searched_improves_on_default_on_its_training_prompts_and_is_cached(analytic):
    from jsbench import zoo
    from jsbench.zoo import oss as zoo_oss
    from jsbench.suites import load_suite

    suite = load_suite("geneval", analytic)
    row = searched_sigmas(analytic, suite, 3, prompts=12, seeds=1, grid_points=5, shifts=3, random_count=0, refine_points=2)
    check_sigmas(row[None])
    stored = json.loads((zoo.schedules_dir() / "analytic" / "searched-geneval-n3.json").read_text())
    assert stored["sigmas"] == row.tolist()
    assert stored["train_score"] >= stored["default_train_score"]
    assert stored["key"]["metric"] == suite.primary_metric
    seeds = stored["key"]["seeds"]
    assert len(seeds) == len(set(seeds)) == stored["train_rows"] == 12  # each training image its own noise


# ---- sources and the command line ---------------------------------------------------------------------


def test_zoo_sources_resolve_with_labels_and_checksums(analytic, tmp_path):
    from jsbench.evaluation.evaluate import resolve_schedule

    (tmp_path / "s.json").write_text("[1, 0.5, 0.2, 0]")
    x = torch.zeros(4, 24)
    for spec, label in (("karras", "karras"), ("karras:5", "karras (rho 5)"), ("exponential", "exponential"),
                        ("beta", "beta"), (f"file:{tmp_path / 's.json'}", "file:s.json")):
        src = resolve_schedule(spec, analytic, 3)
        assert src.label == label and src.checksum
        sig = src.make(x, None if spec.startswith(("karras", "exp", "beta")) else type("C", (), {"prompts": ["p"] * 4})())
        assert sig.shape == (4, 4)
        check_sigmas(sig)


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_eval_runs_oss_and_file_on_analytic(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("JSBENCH_SCHEDULES", str(tmp_path / "cache"))
    (tmp_path / "mine.csv").write_text("1,0.6,0.3,0\n")
    for spec in ("oss:16", "oss-mean:16", "oss-image:16", f"file:{tmp_path / 'mine.csv'}"):
        code, out, err = cli("eval", "--steps", "3", "--seeds", "1", "--schedule", spec, "--no-progress")
        assert code == 0, err
    records = [json.loads(line) for line in (tmp_path / "results" / "records.jsonl").read_text().splitlines()]
    assert {r["method"] for r in records} == {"oss", "oss-mean", "oss-image", "file:mine.csv"}
    assert list((tmp_path / "cache" / "analytic").glob("oss-geneval-n3.json"))


def test_eval_refuses_bad_zoo_sources_in_one_line(cli, tmp_path):
    from test_cli import assert_one_line_error

    (tmp_path / "bad.json").write_text("[1, 0.5, 0.6, 0]")
    assert_one_line_error(cli("eval", "--steps", "3", "--schedule", f"file:{tmp_path / 'bad.json'}"), "bad.json:1", "not below")
    assert_one_line_error(cli("eval", "--steps", "3", "--schedule", "ays"), "no schedule for analytic")
    assert_one_line_error(cli("eval", "--steps", "3", "--schedule", "karras:abc"), "bad schedule 'karras:abc'")


@pytest.mark.slow
def test_eval_runs_oss_and_file_on_scenes_dit(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("JSBENCH_SCHEDULES", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a photo of a red circle\na photo of two squares\n")
    (tmp_path / "per.json").write_text(json.dumps({"a photo of a red circle": [1, 0.8, 0.4, 0], "a photo of two squares": [1, 0.7, 0.2, 0]}))
    from jsbench import zoo
    from jsbench.zoo import oss as zoo_oss

    monkeypatch.setattr(zoo_oss, "oss_sigmas", _small_oss(zoo_oss.oss_sigmas))
    for spec in ("oss", f"file:{tmp_path / 'per.json'}"):
        code, out, err = cli("eval", "--backbone", "scenes-dit", "--steps", "3", "--seeds", "1", "--prompts-file", str(prompts),
                             "--schedule", spec, "--no-progress")
        assert code == 0, err
    records = [json.loads(line) for line in (tmp_path / "results" / "records.jsonl").read_text().splitlines()]
    assert {r["method"] for r in records} == {"oss", "file:per.json"}


def _small_oss(real):
    def small(backbone, suite, steps, teacher_steps=None, prompts=16, seeds=2, log=None):
        return real(backbone, suite, steps, teacher_steps=8, prompts=2, seeds=1, log=log)

    return small


def _scenes_dit():
    return load_backbone("scenes-dit", device="cpu")


@pytest.mark.slow
def test_oss_on_scenes_dit_is_valid_and_beats_evenly_spaced(monkeypatch):
    torch.set_num_threads(1)
    bb = _scenes_dit()
    cond, x_T = _small_batch(bb, prompts=2, seeds=(0,))
    teacher = bb.default_sigmas(10, x_T)[0]
    row, cost = oss_mean_search(bb, cond, x_T, 3, teacher)
    check_sigmas(row[None])
    assert set(row.tolist()) <= set(teacher.tolist())
    even = teacher[torch.tensor([0, 3, 7, 10])]
    assert cost <= _endpoint_mse(bb, cond, x_T, even, teacher) * (1 + 1e-4)
    assert cost == pytest.approx(_endpoint_mse(bb, cond, x_T, row, teacher), rel=1e-3)


# ---- compare: zoo rows beside default ------------------------------------------------------------------


def test_parse_zoo_keeps_beta_parameters_and_refuses_unknown_rows():
    from jsbench.zoo import parse_zoo

    assert parse_zoo("karras,beta:0.5,0.7,oss:50") == ["karras", "beta:0.5,0.7", "oss:50"]
    assert parse_zoo("none") == [] and parse_zoo("") == []
    with pytest.raises(ZooError, match="'magic' is not a zoo schedule"):
        parse_zoo("karras,magic")


def test_compare_puts_zoo_rows_beside_default_with_paired_deltas(analytic, tmp_path):
    from jsbench.report.compare import run_compare
    from jsbench.report.compare_request import CompareRequest
    from jsbench.suites import load_suite

    logs = []
    request = CompareRequest(steps=(3,), policies=tmp_path / "none", records=tmp_path / "r.jsonl", leaderboards=tmp_path / "lb", seeds=1,
                             plots=False, progress=False, zoo="karras,ays,oss:16")
    result = run_compare(request, analytic, load_suite("geneval", analytic), log=logs.append)
    rows = {r["method"]: r for t in result.tables for r in t.rows}
    assert {"default", "karras", "oss"} <= set(rows) and "ays" not in rows
    assert any("skipping ays" in m for m in logs)
    for method in ("karras", "oss"):
        assert rows[method]["delta"] is not None  # paired with default on the same prompts and seeds
    methods = [r["method"] for r in result.tables[0].rows]
    assert methods.index("default") < methods.index("karras") < methods.index("oss")

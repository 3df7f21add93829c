"""OSS against the reference code's definition (Pei, Hu & Gu, arXiv 2503.21774; bebebe666/OptimalSteps,
OSS/OSS.py `search_OSS` and `cal_medium`), transcribed here as plain per-sample loops in the reference's
own index convention, and `jsbench.zoo.oss` (vectorised over the batch, grid indices from the noise end)
run on the same small problems: identical per-sample steps, with and without the free start; the
median as the reference computes it; and the cached `oss` row equal to the transcription's recipe."""

from __future__ import annotations

import json
import math

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.suites import load_suite
from jsbench.zoo.oss import oss_image_source, oss_paths, oss_sigmas, path_sigmas, reference_median


@pytest.fixture(scope="module")
def analytic():
    return load_backbone("analytic")


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("JSBENCH_SCHEDULES", str(tmp_path / "schedules"))


def transcribed_search(velocity_at, x, teacher, student_steps, free_start=True):
    """One sample's reference DP, loop by loop. Reference clock: index i = 0 is the clean end, i = M the
    noise, t[i] its flow time. Returns the reference's step list: the sources of steps N, N-1, ..., 1."""
    M = teacher.numel() - 1
    t = [teacher[M - i].to(torch.float64) for i in range(M + 1)]
    traj = [None] * (M + 1)
    traj[M] = x
    z = x
    for i in range(M, 0, -1):
        z = z + velocity_at(z, t[i]) * (t[i - 1] - t[i])
        traj[i - 1] = z
    dp = [math.inf] * (M + 1)  # one cost per point, carried from level to level
    state = [x] * (M + 1)  # every point starts out holding the noise
    trace = []
    for level in range(student_steps):
        trace.append(list(trace[-1]) if trace else [M] * (M + 1))
        before = list(state)
        for i in range(M, 0, -1):
            if level == 0 and not free_start and i != M:
                continue
            v = velocity_at(before[i], t[i])
            for j in range(i - 1, -1, -1):
                land = before[i] + v * (t[j] - t[i])
                c = float((land - traj[j]).pow(2).mean())
                if c < dp[j]:
                    dp[j], trace[level][j], state[j] = c, i, land
    steps, j = [], 0
    for level in range(student_steps - 1, -1, -1):
        j = trace[level][j]
        steps.append(j)
    return steps


def transcribed_median(all_steps):
    """The reference's cal_medium over per-sample step lists."""
    out = []
    for k in range(len(all_steps[0])):
        column = sorted(s[k] for s in all_steps)
        out.append((column[len(column) // 2] + column[len(column) // 2 - 1]) // 2)
    return out


def _rows(bb, prompts=2, seeds=(0, 1)):
    items = load_suite("geneval", bb).items("train")[:prompts]
    rows = [(it.prompt, s) for it in items for s in seeds]
    return bb.encode([p for p, _ in rows]), bb.initial_noise([s for _, s in rows])


def _transcribed_paths(bb, cond, x_T, steps, teacher, free_start):
    M = teacher.numel() - 1
    out = []
    for b in range(x_T.shape[0]):
        one = cond.take([b])

        def velocity_at(z, sigma, one=one):
            return bb.velocity(z[None], sigma.reshape(1).to(torch.float32), one)[0].to(torch.float64)

        out.append(transcribed_search(velocity_at, x_T[b].to(torch.float64), teacher.to(torch.float32), steps, free_start))
    return out, [[M - i for i in reversed(s)] + [M] for s in out]


@pytest.mark.parametrize("free_start", [True, False])
@pytest.mark.parametrize("teacher_steps,steps", [(8, 2), (12, 3), (10, 4)])
def test_per_sample_steps_equal_the_transcribed_reference(analytic, free_start, teacher_steps, steps):
    cond, x_T = _rows(analytic)
    teacher = analytic.default_sigmas(teacher_steps, x_T)[0]
    ref_steps, ref_paths = _transcribed_paths(analytic, cond, x_T, steps, teacher, free_start)
    paths, costs = oss_paths(analytic, cond, x_T, steps, teacher, free_start=free_start)
    assert paths.tolist() == ref_paths
    assert (costs > 0).all()
    if not free_start:
        assert (paths[:, 0] == 0).all()  # every path starts at sigma 1
    # the median as the reference computes it, mapped back to grid indices
    assert reference_median(paths).tolist() == [teacher_steps - i for i in reversed(transcribed_median(ref_steps))] + [teacher_steps]


def test_the_free_start_is_used_and_lowers_the_endpoint_error(analytic):
    cond, x_T = _rows(analytic, prompts=3)
    teacher = analytic.default_sigmas(20, x_T)[0]
    free, free_cost = oss_paths(analytic, cond, x_T, 3, teacher)
    pinned, pinned_cost = oss_paths(analytic, cond, x_T, 3, teacher, free_start=False)
    assert (free[:, 0] > 0).any()  # some sample's first step starts below sigma 1
    assert (free_cost <= pinned_cost).all()  # the free start can only add paths
    # the rows run as the reference's infer_OSS runs them: the noise enters at the first level, then Euler
    rows = path_sigmas(free, teacher)
    assert (rows[:, 0] < 1).any()
    x = x_T.to(torch.float64)
    for j in range(3):
        x = x + (rows[:, j + 1] - rows[:, j]).double()[:, None] * analytic.velocity(x, rows[:, j], cond)
    torch.testing.assert_close(analytic.sample_latents(x_T, cond, rows).double(), x.to(analytic.dtype).double())


def _counting(bb, monkeypatch):
    """Rows the backbone's velocity is asked for, counted."""
    calls = []
    original = type(bb).velocity
    monkeypatch.setattr(bb, "velocity", lambda x, sigma, cond: calls.append(x.shape[0]) or original(bb, x, sigma, cond))
    return calls


@pytest.mark.parametrize("order", [(3, 5), (5, 3)])
def test_shared_searches_give_each_step_count_the_bits_of_its_own_search(analytic, monkeypatch, order):
    from jsbench.zoo.kept_searches import shared_searches

    cond, x_T = _rows(analytic, prompts=3)
    M = 20
    teacher = analytic.default_sigmas(M, x_T)[0]
    alone = {n: oss_paths(analytic, cond, x_T, n, teacher) for n in order}  # outside: every call its own search
    calls = _counting(analytic, monkeypatch)
    with shared_searches():
        shared = {n: oss_paths(analytic, cond, x_T, n, teacher) for n in order}
        pinned = oss_paths(analytic, cond, x_T, 3, teacher, free_start=False)  # another start rule: its own search
        other = oss_paths(analytic, cond, x_T.clone().mul_(1.0 + 2**-20), 3, teacher)  # other noise: its own search
    B = x_T.shape[0]
    assert sum(calls) == B * (M + 5 * M) + B * (M + 1 + 2 * M) + B * (M + 3 * M)  # one teacher and five levels, not two and eight
    for n in order:
        assert torch.equal(shared[n][0], alone[n][0]) and torch.equal(shared[n][1], alone[n][1])
    assert torch.equal(pinned[0], oss_paths(analytic, cond, x_T, 3, teacher, free_start=False)[0])
    assert not torch.equal(other[1], shared[3][1])
    calls.clear()
    oss_paths(analytic, cond, x_T, 3, teacher)  # after the block nothing is kept
    assert sum(calls) == B * (M + 3 * M)


def test_shared_searches_stay_within_their_budget(analytic):
    from jsbench.zoo import kept_searches

    cond, x_T = _rows(analytic, prompts=2)
    teacher = analytic.default_sigmas(12, x_T)[0]
    with kept_searches.shared_searches(budget=1) as memo:  # no search fits: none is kept, each is computed
        oss_paths(analytic, cond, x_T, 2, teacher)
        assert memo.searches == []
    with kept_searches.shared_searches() as memo:
        first = oss_paths(analytic, cond, x_T, 2, teacher)
        size = memo.searches[0].nbytes()
        memo.budget = int(1.5 * size)  # room for one: the older is dropped for the newer
        cond2, x_T2 = _rows(analytic, prompts=2, seeds=(2, 3))
        oss_paths(analytic, cond2, x_T2, 2, teacher)
        assert len(memo.searches) == 1 and torch.equal(memo.searches[0].x0, x_T2.double())
        with kept_searches.shared_searches() as inner:  # nested: the same memo
            assert inner is memo
        assert kept_searches.active() is memo
    assert kept_searches.active() is None
    assert torch.equal(first[0], oss_paths(analytic, cond, x_T, 2, teacher)[0])


def test_reference_median_keeps_the_integer_division_quirk():
    # reference indices (clean end 0) of three samples' 2-step paths, as grid indices for M = 10
    ref = [[3, 9], [4, 7], [6, 8]]
    paths = torch.tensor([[10 - s[1], 10 - s[0], 10] for s in ref])
    # per position: sorted (3, 4, 6) -> (4 + 3) // 2 = 3 (not the median 4); (7, 8, 9) -> (8 + 7) // 2 = 7
    assert reference_median(paths).tolist() == [10 - 7, 10 - 3, 10]
    assert transcribed_median(ref) == [3, 7]


def test_cached_oss_row_is_the_transcribed_recipe(analytic):
    """The recorded small case: the `oss` row on 3 training prompts x 1 noise with a 12-step teacher is
    the reference recipe (per-sample DP with the free start, then cal_medium) run by the transcription."""
    suite = load_suite("geneval", analytic)
    row = oss_sigmas(analytic, suite, 3, teacher_steps=12, prompts=3, seeds=1)
    from jsbench.zoo import schedules_dir
    stored = json.loads((schedules_dir() / "analytic" / "oss-geneval-n3.json").read_text())
    prompts, seeds = stored["key"]["prompts"], stored["key"]["seeds"]
    assert len(set(seeds)) == len(seeds) == 3  # each training row its own noise
    cond, x_T = analytic.encode(prompts), analytic.initial_noise(seeds)
    teacher = analytic.default_sigmas(12, x_T)[0]
    ref_steps, ref_paths = _transcribed_paths(analytic, cond, x_T, 3, teacher, True)
    want = [12 - i for i in reversed(transcribed_median(ref_steps))] + [12]
    assert stored["median_path"] == want and stored["sample_paths"] == ref_paths
    torch.testing.assert_close(row, path_sigmas(torch.tensor(want), teacher).cpu())
    assert "Pei, Hu & Gu" in stored["method"] and "2503.21774" in stored["method"]


def test_oss_image_gives_each_row_its_own_reference_schedule(analytic):
    cond, x_T = _rows(analytic)
    teacher = analytic.default_sigmas(10, x_T)[0]
    label, make, checksum = oss_image_source(analytic, 3, teacher_steps=10)
    rows = make(x_T, cond)
    _, ref_paths = _transcribed_paths(analytic, cond, x_T, 3, teacher, True)
    assert label == "oss-image" and checksum
    torch.testing.assert_close(rows, path_sigmas(torch.tensor(ref_paths), teacher))
    assert rows.device == x_T.device and rows.shape == (x_T.shape[0], 4)


def test_a_free_start_row_is_valid_only_where_asked():
    from jsbench.schedule import ScheduleError, check_sigmas

    row = torch.tensor([[0.7, 0.3, 0.1, 0.0]])
    check_sigmas(row, free_start=True)
    with pytest.raises(ScheduleError, match="start at sigma = 1"):
        check_sigmas(row)
    for bad in ([[1.2, 0.3, 0.0]], [[0.0, 0.0]]):
        with pytest.raises(ScheduleError):
            check_sigmas(torch.tensor(bad), free_start=True)


def test_oss_image_is_in_the_default_zoo_only_on_the_embedded_worlds(analytic):
    from jsbench.zoo import DEFAULT_ZOO, zoo_rows

    class RealFlow:  # a flow backbone that is not an embedded world (its velocity is a network)
        name = "sd35"
        ays_schedule = None
        velocity = staticmethod(lambda x, s, c: x)
        velocity_dtype = torch.float32

    logs = []
    assert "oss-image" in zoo_rows(list(DEFAULT_ZOO), analytic, 3, logs.append)
    assert "oss-image" not in zoo_rows(list(DEFAULT_ZOO), RealFlow(), 3, logs.append)
    assert any("skipping oss-image" in m and "--zoo" in m for m in logs)
    assert zoo_rows(["oss", "oss-image"], RealFlow(), 3) == ["oss", "oss-image"]  # named: opted in
    # `--zoo` spelling out the default list names oss-image too: it runs (it was once skipped in silence)
    assert "oss-image" in zoo_rows(list(DEFAULT_ZOO), RealFlow(), 3, explicit=True)
    assert "oss-image" not in zoo_rows(list(DEFAULT_ZOO), RealFlow(), 3, explicit=False)

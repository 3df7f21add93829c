import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jsbench.schedule import (
    ScheduleError,
    check_sigmas,
    default_floor,
    floor_increments,
    increments_from_sigmas,
    shift_sigmas,
    shifted_sigmas,
    sigmas_from_increments,
    uniform_sigmas,
    unfloor_increments,
)


def assert_valid(sigmas: torch.Tensor) -> None:
    assert torch.all(sigmas[:, 0] == 1.0)
    assert torch.all(sigmas[:, -1] == 0.0)
    assert torch.all(sigmas[:, :-1] > sigmas[:, 1:]), "not strictly decreasing"
    check_sigmas(sigmas)


simplex_rows = st.integers(1, 40).flatmap(
    lambda n: st.lists(
        st.lists(st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=True), min_size=n, max_size=n).filter(lambda r: sum(r) > 0),
        min_size=1,
        max_size=4,
    )
)


@settings(max_examples=300, deadline=None)
@given(simplex_rows, st.sampled_from([torch.float32, torch.float64]))
def test_every_floored_simplex_point_is_a_valid_schedule(rows, dtype):
    # any point of the simplex, including its faces (zeros), becomes a valid schedule after the floor
    # normalised in float64, then cast: a row like [0, ..., 5e-202] is a simplex point in float64 but
    # all zeros (not a simplex point) if built in float32 first
    d = torch.tensor(rows, dtype=torch.float64)
    d = (d / d.sum(-1, keepdim=True)).to(dtype)
    steps = d.shape[-1]
    inc = floor_increments(d, default_floor(steps))
    sigmas = sigmas_from_increments(inc)
    assert sigmas.shape == (d.shape[0], steps + 1)
    assert_valid(sigmas)
    assert increments_from_sigmas(sigmas).min() > 0


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 1000), st.floats(0.05, 20.0))
def test_default_schedules_are_valid(steps, shift):
    assert_valid(uniform_sigmas(steps, batch=2))
    assert_valid(shifted_sigmas(steps, shift, batch=2))


def test_shift_matches_sd3_formula_and_fixes_endpoints():
    s = torch.linspace(0, 1, 11, dtype=torch.float64)
    out = shift_sigmas(s, 3.0)
    assert torch.allclose(out, 3 * s / (1 + 2 * s))
    assert out[0] == 0 and out[-1] == 1


def test_increment_roundtrip_and_floor_inverse():
    d = torch.distributions.Dirichlet(torch.ones(7)).sample((5,)).double()
    inc = floor_increments(d, 0.01)
    assert torch.allclose(unfloor_increments(inc, 0.01), d)
    sig = sigmas_from_increments(inc)
    assert torch.allclose(increments_from_sigmas(sig), inc, atol=1e-12)
    assert torch.allclose(inc.sum(-1), torch.ones(5, dtype=torch.float64))


@pytest.mark.parametrize(
    "bad",
    [
        torch.tensor([[1.0, 0.5, 0.5, 0.0]]),  # zero step
        torch.tensor([[1.0, 0.6, 0.7, 0.0]]),  # increasing
        torch.tensor([[0.9, 0.5, 0.0]]),  # does not start at 1
        torch.tensor([[1.0, 0.5, 0.1]]),  # does not end at 0
        torch.tensor([[1.0, float("nan"), 0.0]]),
        torch.tensor([1.0, 0.0]),  # no batch dim
    ],
)
def test_invalid_schedules_are_refused(bad):
    with pytest.raises(ScheduleError):
        check_sigmas(bad)


def test_floor_too_large_is_refused():
    with pytest.raises(ScheduleError):
        floor_increments(torch.full((1, 4), 0.25), 0.3)
    with pytest.raises(ScheduleError):
        uniform_sigmas(0)

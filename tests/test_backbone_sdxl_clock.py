"""Round trips of SD-XL's clock conversion (jsbench/backbones/sdxl_clock.py) against diffusers' scheduler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from jsbench.backbones.sdxl_clock import (
    flow_from_ve,
    flow_sigmas_from_ve,
    timesteps_from_ve_sigmas,
    ve_from_flow,
    ve_sigma_table,
    ve_sigmas_from_flow,
    ve_sigmas_from_timesteps,
)
from jsbench.schedule import ScheduleError


@pytest.fixture(scope="module")
def scheduler():
    from diffusers import EulerDiscreteScheduler

    # SD-XL base's scheduler config
    return EulerDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1,
        timestep_spacing="leading", num_train_timesteps=1000,
    )


@pytest.fixture(scope="module")
def table(scheduler):
    return ve_sigma_table(scheduler.alphas_cumprod)


def test_table_is_the_schedulers_sigmas(scheduler, table):
    assert table.shape == (1000,) and (table[1:] > table[:-1]).all()
    assert torch.equal(table.flip(0), scheduler.sigmas[:-1])  # bit-identical
    assert 14.0 < table[-1].item() < 15.0 and 0.02 < table[0].item() < 0.04  # SD-XL's ~0.029 .. ~14.6


def test_integer_timesteps_round_trip_exactly(table):
    tau = torch.arange(1000, dtype=torch.float32)
    assert torch.equal(timesteps_from_ve_sigmas(table, table), tau)
    assert torch.equal(ve_sigmas_from_timesteps(tau, table), table)


def test_fractional_timesteps_round_trip(table):
    tau = torch.rand(500, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 999
    back = timesteps_from_ve_sigmas(ve_sigmas_from_timesteps(tau, table), table)
    torch.testing.assert_close(back.double(), tau, atol=2e-3, rtol=0)
    s = table[0] + (table[-1] - table[0]) * torch.rand(500, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(ve_sigmas_from_timesteps(timesteps_from_ve_sigmas(s, table), table), s, rtol=1e-4, atol=0)


def test_sigma_to_timestep_matches_diffusers(scheduler, table):
    log_sigmas = np.log(table.numpy())
    s = np.concatenate([np.geomspace(0.001, 20.0, 200), table.numpy()[::37]]).astype(np.float32)
    theirs = np.array([scheduler._sigma_to_t(v, log_sigmas) for v in s], dtype=np.float64)
    ours = timesteps_from_ve_sigmas(torch.from_numpy(s), table).double().numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-3, rtol=0)
    # outside the trained range the timestep clamps, as in diffusers
    assert ours.min() == 0.0 and ours.max() == 999.0


def test_flow_ve_round_trip_and_endpoints():
    u = torch.linspace(0, 1, 101)
    start = torch.tensor(14.6146)
    ve = ve_sigmas_from_flow(u, start)
    assert ve[0].item() == 0.0 and abs(ve[-1].item() - start.item()) <= 1e-5 * start.item()
    assert (ve[1:] > ve[:-1]).all()
    torch.testing.assert_close(flow_sigmas_from_ve(ve, start), u, atol=1e-6, rtol=0)
    t = torch.rand(100, dtype=torch.float64) * 0.99
    torch.testing.assert_close(flow_from_ve(ve_from_flow(t)), t)
    with pytest.raises(ScheduleError):
        ve_from_flow(torch.tensor([1.0]))


@pytest.mark.parametrize("steps", [1, 4, 30, 50])
def test_default_schedules_survive_the_clock(scheduler, table, steps):
    """The pipeline's N-step (VE sigmas, timesteps) -> policy clock -> back, to float32 round-off."""
    scheduler.set_timesteps(steps)
    ve = scheduler.sigmas.to(torch.float32)
    u = flow_sigmas_from_ve(ve, ve[0])
    assert abs(u[0].item() - 1.0) < 1e-6 and u[-1].item() == 0.0
    back = ve_sigmas_from_flow(u, ve[0])
    torch.testing.assert_close(back, ve, rtol=2e-6, atol=0)
    torch.testing.assert_close(timesteps_from_ve_sigmas(back[:-1], table), scheduler.timesteps.float(), atol=2e-3, rtol=0)

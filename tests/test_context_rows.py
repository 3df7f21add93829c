"""A training rollout's rows (K schedules per context, all from the context's noise) sampled with each context's
first network call made once (`FlowMatchBackbone.sample_context_rows`) give the images that sampling every
row gives, bit for bit, with fewer calls of the denoiser; where that could not hold, the rows are sampled
as they are."""

from __future__ import annotations

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.backbones.base import sample_in_batches, sample_rollout_rows, train_batch_size
from jsbench.schedule import ScheduleError

from tests.tiny_pipelines import PROMPTS, one_thread, tiny_backbone  # noqa: F401 (fixture)


def _learned_like(n: int, steps: int, seed: int) -> torch.Tensor:
    """n float32 schedules from 1 to 0 with Dirichlet increments, as a one-shot policy draws them."""
    g = torch.Generator().manual_seed(seed)
    inc = -torch.rand(n, steps, generator=g, dtype=torch.float64).log()  # Dirichlet(1, ..., 1), normalised below
    inc = inc / inc.sum(1, keepdim=True)
    sigmas = torch.cat([torch.ones(n, 1, dtype=torch.float64), 1.0 - inc.cumsum(1)], 1).clamp_min(0.0).float()
    sigmas[:, -1] = 0.0
    return sigmas


def _counting_calls(backbone):
    """The row count of every denoiser forward call made, in order (a forward hook), and the hook's handle."""
    rows: list[int] = []
    handle = backbone.pipe.transformer.register_forward_hook(lambda module, args, kwargs, out: rows.append(int(kwargs["hidden_states"].shape[0])),
                                                             with_kwargs=True)
    return rows, handle


def _both(backbone, x_T, cond, rows, sigmas, batch):
    """(images of every row sampled, images through sample_rollout_rows, the row counts of each one's denoiser calls)."""
    calls, handle = _counting_calls(backbone)
    try:
        plain = sample_in_batches(backbone, x_T[rows], cond.take(rows), sigmas, batch)
        calls_plain = list(calls)
        calls.clear()
        shared = sample_rollout_rows(backbone, x_T, cond, rows, sigmas, batch)
        return plain, shared, calls_plain, list(calls)
    finally:
        handle.remove()


@pytest.mark.slow  # the scenes-dit pipeline: ~3 s
def test_scenes_dit_rollout_equals_sampling_every_row(one_thread):
    """A training update's shape on the shipped backbone: 16 contexts x K = 4, 3 steps, 16 rows per call."""
    from jsbench.suites import load_suite

    bb = load_backbone("scenes-dit")
    prompts = [it.prompt for it in load_suite("geneval", bb).items("train")[:16]]
    cond, x_T = bb.encode(prompts), bb.initial_noise(list(range(300, 316)))
    rows = torch.arange(16).repeat_interleave(4)
    batch = train_batch_size(bb)
    assert batch == 16
    plain, shared, calls_plain, calls_shared = _both(bb, x_T, cond, rows, _learned_like(64, 3, 0), batch)
    assert torch.equal(plain, shared)
    # 4 calls x 3 steps, against one first call for the 16 contexts and 4 calls x 2 later steps; every call
    # of the same size (guidance batches the conditional and unconditional rows: 32)
    assert calls_plain == [32] * 12 and calls_shared == [32] * 9


@pytest.mark.parametrize("kind", ["sd35", "flux-dev"])
def test_tiny_flow_backbones_rollout_equals_sampling_every_row(kind, one_thread):
    bb = tiny_backbone(kind)
    prompts = (PROMPTS * 2)[:5]
    cond, x_T = bb.encode(prompts), bb.initial_noise(list(range(5)))
    rows = torch.tensor([3, 3, 0, 0, 1, 1, 4, 4, 2, 2, 0, 3])  # any order, contexts repeated unevenly
    sigmas = _learned_like(12, 3, 1)
    plain, shared, calls_plain, calls_shared = _both(bb, x_T, cond, rows, sigmas, batch=4)
    assert torch.equal(plain, shared)
    # 5 contexts' first calls in 2 calls of the sampler's size (the last filled up), then 3 calls x 2 steps
    assert len(calls_plain) == 3 * 3 and len(calls_shared) == 2 + 3 * 2
    assert len(set(calls_plain)) == 1 and set(calls_shared) == set(calls_plain)


@pytest.mark.parametrize("case", ["free start", "ragged", "one call"])
def test_rows_that_cannot_share_are_sampled_as_they_are(case, one_thread):
    bb = tiny_backbone("sd35")
    cond, x_T = bb.encode(PROMPTS[:2]), bb.initial_noise([7, 8])
    rows, sigmas, batch = torch.tensor([0, 0, 0, 1, 1, 1]), _learned_like(6, 2, 2), 3
    if case == "free start":  # one row of context 0 starts below 1 (an OSS free start): its first call differs
        sigmas[1, 0] = 0.9
    elif case == "ragged":  # 10 rows in calls of 4: the last call, of 2, would get velocities made in a call of 4
        rows, sigmas, batch = torch.tensor([0] * 5 + [1] * 5), _learned_like(10, 2, 2), 4
    else:  # every row in one call: a first call for the contexts would save no call
        batch = 6
    plain, shared, calls_plain, calls_shared = _both(bb, x_T, cond, rows, sigmas, batch)
    assert torch.equal(plain, shared) and calls_shared == calls_plain


def test_a_rounded_schedule_is_refused_as_every_sampler_call_refuses_it(one_thread):
    bb = tiny_backbone("sd35")
    cond, x_T = bb.encode(PROMPTS[:2]), bb.initial_noise([7, 8])
    rows, sigmas = torch.tensor([0, 0, 1, 1]), _learned_like(4, 2, 3).to(torch.bfloat16)
    for sample in (lambda: sample_in_batches(bb, x_T[rows], cond.take(rows), sigmas, 2),
                   lambda: sample_rollout_rows(bb, x_T, cond, rows, sigmas, 2)):
        with pytest.raises(ScheduleError, match="float32 or float64"):
            sample()


def test_a_backbone_that_samples_otherwise_is_sampled_through_its_own_sample(one_thread):
    """A wrapper that forwards attributes (a spy) and a subclass that overrides `sample` both see every call."""
    bb = tiny_backbone("sd35")
    cond, x_T = bb.encode(PROMPTS[:2]), bb.initial_noise([7, 8])
    rows, sigmas = torch.tensor([0, 0, 0, 1, 1, 1]), _learned_like(6, 2, 4)
    seen = []

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def sample(self, x, c, s):
            seen.append(x.shape[0])
            return self.inner.sample(x, c, s)

    class Overriding(type(bb)):
        def sample(self, x, c, s):
            seen.append(x.shape[0])
            return super().sample(x, c, s)

    plain = sample_in_batches(bb, x_T[rows], cond.take(rows), sigmas, 3)
    assert torch.equal(sample_rollout_rows(Spy(bb), x_T, cond, rows, sigmas, 3), plain) and seen == [3, 3]
    seen.clear()
    overriding = object.__new__(Overriding)
    overriding.__dict__.update(bb.__dict__)
    assert torch.equal(sample_rollout_rows(overriding, x_T, cond, rows, sigmas, 3), plain) and seen == [3, 3]

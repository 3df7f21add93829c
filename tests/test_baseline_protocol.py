"""Every registered baseline (jsbench's and any installed plugin's) is what its `Baseline` record declares:
its minimum shape is enforced in one line, its values are a finite [B, K] tensor that `compute` and the
vmapped simulation agree on, a shrinkage is reported exactly when declared, and a baseline declared
leave-one-out does not move when its own sample's reward moves (on a random reward matrix)."""

from __future__ import annotations

import pytest
import torch

from jsbench.baselines import BASELINES, Baseline, BaselineError, baseline_record, registered_baselines, validate_baseline
from jsbench.train.config import baseline_help

RECORDS = registered_baselines()


def test_the_records_are_the_registry_and_the_help_names_them_all():
    assert [b.name for b in RECORDS][: len(BASELINES)] == list(BASELINES)  # jsbench's first, in lab order
    assert len({b.lab_order for b in BASELINES.values()}) == len(BASELINES)
    assert all(name in baseline_help() for name in BASELINES)


@pytest.mark.parametrize("record", RECORDS, ids=lambda b: b.name)
def test_each_baseline_keeps_its_declaration(record: Baseline):
    assert isinstance(record, Baseline) and baseline_record(record.name) is record
    assert record.min_samples >= 1 and record.min_contexts >= 1 and record.description and record.origin
    B, K = max(record.min_contexts, 5), max(record.min_samples, 4)
    gen = torch.Generator().manual_seed(11)
    r = torch.randn(B, K, generator=gen, dtype=torch.float64) + torch.randn(B, 1, generator=gen, dtype=torch.float64)
    values = record.values(r)
    assert values.shape == (B, K) and torch.isfinite(values).all()
    result = record.compute(r)
    assert torch.equal(result.baseline, values)
    assert (result.shrinkage is not None) == record.shrinkage
    stacked = torch.stack([r, r.flip(0)])
    assert torch.allclose(torch.vmap(record.values)(stacked)[0], values)  # the lab simulates with vmap
    # below its declared minimum it refuses in one line naming itself
    for contexts, samples in ((record.min_contexts - 1, K), (B, record.min_samples - 1)):
        if contexts >= 1 and samples >= 1:
            with pytest.raises(BaselineError, match=repr(record.name)):
                validate_baseline(record.name, contexts, samples)
    validate_baseline(record.name, record.min_contexts, record.min_samples)


@pytest.mark.parametrize("record", [b for b in RECORDS if b.leave_one_out], ids=lambda b: b.name)
def test_a_leave_one_out_baseline_never_uses_its_own_samples_reward(record: Baseline):
    B, K = max(record.min_contexts, 5), max(record.min_samples, 3)
    r = torch.rand(B, K, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    before = record.values(r)
    for i in range(B):
        for k in range(K):
            moved = r.clone()
            moved[i, k] += 3.7
            assert torch.allclose(record.values(moved)[i, k], before[i, k], rtol=0, atol=1e-12), (record.name, i, k)

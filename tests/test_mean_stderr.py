"""stats.mean_stderr (sequences, torch tensors, numpy arrays) and stats.overall_of_tasks."""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from jsbench.stats import mean_stderr, overall_of_tasks
from jsbench.suites.base import EvalItem, aggregate_by_task


def test_mean_stderr_of_a_sequence():
    m, se = mean_stderr([1.0, 2.0, 3.0, 6.0])
    assert m == 3.0 and se == math.sqrt((4 + 1 + 0 + 9) / 3 / 4)
    assert mean_stderr((0, 1)) == (0.5, 0.5)
    m, se = mean_stderr([0.25])
    assert m == 0.25 and math.isnan(se)
    assert all(math.isnan(v) for v in mean_stderr([]))


def test_mean_stderr_of_a_tensor_keeps_its_dtype():
    x = torch.rand(37, generator=torch.Generator().manual_seed(3))  # float32
    m, se = mean_stderr(x)
    assert m == float(x.mean()) and se == float(x.std(unbiased=True) / math.sqrt(37))
    md, sed = mean_stderr(x.double())
    assert md == float(x.double().mean()) and sed == float(x.double().std(unbiased=True) / math.sqrt(37))
    assert (m, se) != (md, sed)  # float32 and float64 reductions differ on these values: the caller chooses
    assert mean_stderr(x.tolist()) == pytest.approx((md, sed), rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one element: nan without torch's degrees-of-freedom warning
        m1, se1 = mean_stderr(torch.tensor([0.5]))
    assert m1 == 0.5 and math.isnan(se1)
    assert all(math.isnan(v) for v in mean_stderr(torch.zeros(0)))


def test_mean_stderr_of_a_numpy_array():
    x = np.random.default_rng(0).random(11)
    m, se = mean_stderr(x)
    assert m == float(x.mean()) and se == float(x.std(ddof=1) / math.sqrt(11))
    assert isinstance(m, float) and isinstance(se, float)
    m1, se1 = mean_stderr(np.array([2.0]))
    assert m1 == 2.0 and math.isnan(se1)
    assert all(math.isnan(v) for v in mean_stderr(np.zeros(0)))


def test_overall_of_tasks():
    value, se = overall_of_tasks([(1.0, 0.3), (0.0, 0.4)])
    assert value == 0.5 and se == math.sqrt(0.3**2 + 0.4**2) / 2
    value, se = overall_of_tasks(iter([(1.0, float("nan")), (0.5, 0.2)]))  # a one-image task adds no error
    assert value == 0.75 and se == 0.1
    assert all(math.isnan(v) for v in overall_of_tasks([]))


def test_overall_of_tasks_is_the_suites_overall():
    items = [EvalItem(f"p{i}", task) for i, task in enumerate(["a", "a", "a", "b", "b", "c"])]
    scores = [{"correct": v} for v in (1.0, 0.0, 1.0, 1.0, 1.0, 0.0)]
    overall = next(m for m in aggregate_by_task(scores, items) if m.task == "overall")
    by_task = {"a": [1.0, 0.0, 1.0], "b": [1.0, 1.0], "c": [0.0]}
    # one image per prompt: the prompt-clustered SE is the naive one
    assert (overall.value, overall.stderr) == pytest.approx(overall_of_tasks(mean_stderr(v) for v in by_task.values()))
    assert overall.value == (2 / 3 + 1.0 + 0.0) / 3


def test_importing_splits_loads_neither_torch_nor_numpy():
    code = "import sys, jsbench.splits; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

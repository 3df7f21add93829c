"""One rule picks the device: an explicit device, else a distributed run's own accelerator, else the caller's default."""

from types import SimpleNamespace

import pytest
import torch

from jsbench.devices import AUTO, DeviceError, pick_device


def _dist(device: str, distributed: bool = True):
    return SimpleNamespace(distributed=distributed, device=torch.device(device))


def test_an_explicit_device_wins():
    assert pick_device("cpu", dist=_dist("cuda:1"), default=AUTO) == torch.device("cpu")
    assert pick_device(torch.device("cuda:2")) == torch.device("cuda:2")


def test_a_distributed_run_on_accelerators_puts_one_under_each_process():
    assert pick_device(None, dist=_dist("cuda:1")) == torch.device("cuda:1")
    assert pick_device(None, dist=_dist("cuda:1"), default="cpu") == torch.device("cuda:1")
    # on CPUs, or with one process, the caller's default holds (None: the backbone chooses)
    assert pick_device(None, dist=_dist("cpu")) is None
    assert pick_device(None, dist=_dist("cuda:0", distributed=False), default="cpu") == torch.device("cpu")


def test_the_default_auto_is_cuda_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device(None, default=AUTO) == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device(None, default=AUTO) == torch.device("cpu")
    assert pick_device(None) is None


def test_backbones_and_policies_pick_through_it(monkeypatch):
    from jsbench.backbones import load_backbone
    from jsbench.policy.schedule_policy import make_policy

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    bb = load_backbone("analytic")
    assert bb.device == torch.device("cpu")  # the embedded world: the CPU unless told, even with CUDA
    monkeypatch.undo()
    assert next(make_policy(bb, 3, "global").parameters()).device == bb.device
    assert next(make_policy(bb, 3, "global", device="meta").parameters()).device == torch.device("meta")


def test_an_unknown_device_is_one_line():
    with pytest.raises(DeviceError, match="unknown device 'gpu0'"):
        pick_device("gpu0")


def test_cli_refuses_an_unknown_device_in_one_line(cli):
    code, out, err = cli("eval", "--device", "gpu0", "--steps", "3", "--seeds", "1", "--no-progress")
    assert code == 2 and "Traceback" not in err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["error: unknown device 'gpu0': use cpu, cuda, cuda:N or another torch device"]

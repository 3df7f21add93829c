"""Where jsbench runs: the one rule that picks a torch device.

Every caller that chooses a device goes through `pick_device`: the CLI and the trainer (a distributed
run puts one accelerator under each process), the backbones (the embedded worlds run on the CPU, the
diffusers backbones on CUDA when there is one) and the policies (beside their backbone).
"""

from __future__ import annotations

import torch

from jsbench import JsbenchError

AUTO = "auto"  # CUDA when available, else the CPU


class DeviceError(JsbenchError):
    pass


def pick_device(device=None, *, dist=None, default=None) -> torch.device | None:
    """The device to run on.

    `device` (a string such as "cpu", "cuda:1", or a torch.device) wins when given. Otherwise, in a
    distributed run (`dist`, a DistContext) on accelerators, this process's own accelerator: one per
    process. Otherwise `default`: AUTO ("auto": CUDA when available, else the CPU), a device (e.g. "cpu",
    or a backbone's device), or None, which returns None: the caller leaves the choice to the backbone.
    A device string torch does not know, or a CUDA one this torch cannot use, is refused in one line."""
    if device is None and dist is not None and dist.distributed and dist.device.type != "cpu":
        return torch.device(dist.device)
    if device is None:
        if default is None:
            return None
        device = ("cuda" if torch.cuda.is_available() else "cpu") if default == AUTO else default
    if isinstance(device, torch.device):
        return device
    try:
        picked = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceError(f"unknown device {device!r}: use cpu, cuda, cuda:N or another torch device") from None
    check_available(picked)  # a name given as text (--device) must name a device this torch can use
    return picked


def check_available(device: torch.device) -> None:
    """Refuse, in one line, a CUDA device this torch cannot use: a CPU-only build, no GPU, or an index
    past the last GPU."""
    if device.type != "cuda":
        return
    if not torch.cuda.is_available():
        build = "a CPU-only torch build" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise DeviceError(f"--device {device}: {build}; use --device cpu (or install a CUDA torch on a GPU machine)")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here (cuda:0..cuda:{torch.cuda.device_count() - 1})")

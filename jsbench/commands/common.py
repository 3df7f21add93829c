"""What several commands do before their work: load a backbone quietly, refuse an output or a device they
could not use (before any weights load), and name their own command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional


def load_backbone_quietly(name: str, model: Optional[str], device: Optional[str], dtype: Optional[str] = None, offload: bool | str = False,
                          decode_chunk: Optional[int] = None, progress: bool = True, guidance: Optional[float] = None, share_with=None):
    from jsbench.backbones import load_backbone
    from jsbench.progress import quiet_model_loading

    quiet_model_loading(show_bars=progress)  # --no-progress also hides the libraries' loading bars

    return load_backbone(name, model, device, dtype=dtype, offload=offload, decode_chunk=decode_chunk, guidance=guidance,
                         share_with=share_with)


def check_outputs(records: Optional[Path] = None, out: Optional[Path] = None, out_folder: Optional[Path] = None,
                  leaderboards: Optional[Path] = None, report: List[Path] = ()) -> None:
    """Refuse, before any work, an output this command could not write (one line, exit 2)."""
    from jsbench.io import check_writable_file, check_writable_folder

    for option, path in (("--records", records), ("--out", out)):
        if path is not None:
            check_writable_file(path, option)
    for option, path in (("--out", out_folder), ("--leaderboards", leaderboards)):
        if path is not None:
            check_writable_folder(path, option)
    for path in report:
        check_writable_file(path, "--report")


def check_device(device: Optional[str]) -> None:
    """Refuse, before any weights load, a --device this torch cannot use (e.g. cuda on a CPU-only build)."""
    if device is not None:
        from jsbench.devices import pick_device

        pick_device(device)


def command_line() -> str:
    """This process's jsbench command line, as a plan names it."""
    import shlex

    return "jsbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])

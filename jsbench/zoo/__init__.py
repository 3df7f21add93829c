"""Schedule sources: every `--schedule` spec, and the schedule zoo, every schedule a learned one is compared
against. One registry (`registry.py`: each kind's `ScheduleKind` declaration) holds them all: the hand-made
`default`, `ceiling`, `uniform`, `shift:S` (plain.py) and `policy:PATH` (policy.py), the zoo rows below, and
other packages' sources (entry-point group `jsbench.schedules`, docs/plugins.md).

    karras[:RHO]      Karras/EDM sigmas (diffusers' `use_karras_sigmas`, rho 7 unless given)   families.py
    exponential       log-uniform sigmas (diffusers' `use_exponential_sigmas`)                 families.py
    beta[:A,B]        Beta-quantile sigmas (diffusers' `use_beta_sigmas`, a = b = 0.6)         families.py
    ays               Align Your Steps (diffusers' `AysSchedules`) where the family has one    ays.py
    oss[:M]           Optimal Stepsize Sampling as its authors run it (cached)                 oss.py
    oss-mean[:M]      OSS with one DP on the batch-mean cost, starting at 1 (cached)           oss.py
    oss-image[:M]     OSS searched on each evaluated image's own teacher trajectory            oss.py
    searched          the best global schedule of a grid plus coordinate refinement, scored
                      with the suite's own metric on its training prompts (cached)             searched.py
    file:PATH         the user's schedule(s): JSON or CSV, one sigma list or one per prompt     files.py

Each family lives in its own module and registers a builder (`registry.register_source`); this package
offers the entry points callers use: `zoo_source_row`, `parse_zoo`, `zoo_rows`. Its names are imported on
first use, so naming the sources (the CLI's help) imports no torch.

The clock. diffusers converts the sigmas of a schedule *after* its shift, in the scheduler's own sigma:
flow time for the flow-matching scheduler (SD3, Flux), the VE sigma sqrt((1 - abar)/abar) for
EulerDiscreteScheduler (SD-XL). The family formulas here do the same: they take sigma_max and sigma_min
from the backbone's own default N-step schedule (its first and last non-zero levels, so the shift,
Flux's resolution-dependent mu, SD-XL's "leading" spacing are all already in them), spread N levels
between them in the native sigma, append the final 0, and map the row onto the policy's clock (flow
time, or SD-XL's normalised flow time). A family row is what a diffusers scheduler with the matching
`use_*_sigmas` flag runs for N steps; `tests/test_zoo.py` checks that against the scheduler itself for
each backbone family.

Cached sources (`oss`, `oss-mean`, `searched`) are JSON files under `<project>/schedules/<backbone>/`
(or $JSBENCH_SCHEDULES), keyed by everything they depend on (model, steps, suite, prompts, seeds, search
settings); a file whose key matches is reused, anything else is recomputed and rewritten atomically.
"""

from __future__ import annotations

import importlib
import re

from jsbench.zoo.registry import SOURCES, ZooError, default_zoo_kinds, resolve_source, zoo_kind, zoo_kind_names

__all__ = [
    "ZOO_KINDS",
    "DEFAULT_ZOO",
    "ZooError",
    "Clock",
    "clock",
    "family_sigmas",
    "ays_sigmas",
    "ScheduleFile",
    "read_schedule_file",
    "oss_paths",
    "reference_median",
    "oss_sigmas",
    "oss_mean_search",
    "oss_mean_sigmas",
    "oss_image_source",
    "search_global_schedule",
    "searched_sigmas",
    "zoo_source_row",
    "schedules_dir",
    "parse_zoo",
    "zoo_rows",
]

# name -> the module that defines it, imported on first use (these modules import torch)
_LAZY = {
    "Clock": "clock", "clock": "clock", "family_sigmas": "families", "ays_sigmas": "ays", "ScheduleFile": "files",
    "read_schedule_file": "files", "oss_paths": "oss", "reference_median": "oss", "oss_sigmas": "oss", "oss_mean_search": "oss",
    "oss_mean_sigmas": "oss", "oss_image_source": "oss", "search_global_schedule": "searched", "searched_sigmas": "searched",
    "schedules_dir": "cache",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"jsbench.zoo.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: jsbench's zoo rows, in leaderboard order (`registry.SOURCES`; a plugin's zoo rows are in `zoo_kind_names()`)
ZOO_KINDS = tuple(k.name for k in SOURCES if k.zoo)
#: rows `jsbench compare` adds by default (ays only where the family has one, oss-image only on the embedded
#: worlds: elsewhere it costs a teacher trajectory per image, so it runs only when named in --zoo)
DEFAULT_ZOO = default_zoo_kinds()


def zoo_source_row(spec: str, backbone, steps: int, suite=None, log=None):
    """(label, make(x_T, cond) -> [B, N+1], checksum) of a zoo `--schedule` spec."""
    kind = spec.partition(":")[0]
    if kind not in zoo_kind_names():
        raise ZooError(f"{kind!r} is not a zoo schedule ({', '.join(zoo_kind_names())})")
    source = resolve_source(spec, backbone, steps, suite=suite, log=log)
    return source.label, source.make, source.checksum


def parse_zoo(text: str) -> list[str]:
    """`--zoo karras,beta:0.5,0.7,oss` -> ['karras', 'beta:0.5,0.7', 'oss'] ('none' or '' -> [])."""
    out: list[str] = []
    for token in (t.strip() for t in (text or "").split(",")):
        if not token or token == "none":
            continue
        if out and re.fullmatch(r"[0-9.eE+-]+", token) and out[-1].startswith("beta:"):
            out[-1] += "," + token  # beta:A,B keeps its second number
            continue
        kind = token.partition(":")[0]
        zoo = zoo_kind_names()
        if kind not in zoo:
            raise ZooError(f"--zoo: {token!r} is not a zoo schedule; use a comma-separated list of {', '.join(k for k in zoo if k != 'file')}, or none")
        out.append(token)
    return out


def zoo_rows(specs: list[str], backbone, steps: int, log=None, explicit: bool | None = None) -> list[str]:
    """The zoo specs that exist for this backbone at N steps (ays only where the family has one and the
    budget fits its clock, the oss rows only where the backbone has a flow velocity); from the default list,
    opt-in rows (oss-image off the embedded worlds) are left out. `explicit`: the list was named (--zoo),
    so every opt-in row in it runs, even when it spells the default list; None: named unless it is
    DEFAULT_ZOO. Each skip is logged."""
    keep = []
    by_default = (tuple(specs) == DEFAULT_ZOO) if explicit is None else not explicit
    for spec in specs:
        kind = zoo_kind(spec.partition(":")[0])
        try:
            if kind.available is not None:
                kind.available(backbone, steps)
            why = kind.opt_in(backbone) if (by_default and kind.opt_in is not None) else None
        except ZooError as exc:
            why = str(exc)
        if why:
            if log:
                log(f"  skipping {spec}: {why}")
            continue
        keep.append(spec)
    return keep

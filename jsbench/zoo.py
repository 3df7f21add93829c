"""The schedule zoo: every schedule a learned one is compared against, as a `--schedule` source.

    karras[:RHO]      Karras/EDM sigmas (diffusers' `use_karras_sigmas`, rho 7 unless given)
    exponential       log-uniform sigmas (diffusers' `use_exponential_sigmas`)
    beta[:A,B]        Beta-quantile sigmas (diffusers' `use_beta_sigmas`, a = b = 0.6 unless given)
    ays               Align Your Steps (diffusers' `AysSchedules`) where the family has one: SD-XL
    oss[:M]           Optimal Stepsize Sampling: N of an M-step teacher's timesteps, chosen by dynamic
                      programming so that the student's endpoint matches the teacher's (cached)
    searched          the best global schedule of a candidate grid plus coordinate refinement, scored
                      with the suite's own metric on its training prompts (cached)
    file:PATH         the user's schedule(s): JSON or CSV, one sigma list or one per prompt

The clock. diffusers converts the sigmas of a schedule *after* its shift, in the scheduler's own sigma:
flow time for the flow-matching scheduler (SD3, Flux), the VE sigma sqrt((1 - abar)/abar) for
EulerDiscreteScheduler (SD-XL). The family formulas here do the same: they take sigma_max and sigma_min
from the backbone's own default N-step schedule (its first and last non-zero levels, so the shift,
Flux's resolution-dependent mu, SD-XL's "leading" spacing are all already in them), spread N levels
between them in the native sigma, append the final 0, and map the row onto the policy's clock (flow
time, or SD-XL's normalised flow time). A family row is what a diffusers scheduler with the matching
`use_*_sigmas` flag runs for N steps; `tests/test_zoo.py` checks that against the scheduler itself for
each backbone family. Every row is valid by construction: 1 = sigma_0 > ... > sigma_N = 0.

Cached sources (`oss`, `searched`) are JSON files under `<project>/schedules/<backbone>/` (or
$JSBENCH_SCHEDULES), keyed by everything they depend on (model, steps, suite, prompts, seeds, search
settings); a file whose key matches is reused, anything else is recomputed and rewritten atomically.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from jsbench import JsbenchError
from jsbench.schedule import (
    ScheduleError,
    beta_levels,
    candidate_schedules,
    check_sigmas,
    exponential_levels,
    karras_levels,
    loglinear_interp,
)

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
    "oss_search",
    "oss_sigmas",
    "search_global_schedule",
    "searched_sigmas",
    "zoo_source_row",
    "schedules_dir",
    "parse_zoo",
    "zoo_rows",
]

ZOO_KINDS = ("karras", "exponential", "beta", "ays", "oss", "searched", "file")
#: rows `jsbench compare` adds by default (ays only where the family has one)
DEFAULT_ZOO = ("karras", "ays", "oss", "searched")
#: the searched global schedule's grid and coordinate search (`searched_sigmas`; `jsbench.plan` costs it)
SEARCH_SETTINGS = dict(grid_points=8, shifts=8, random_count=24, sweeps=1, refine_points=4)


class ZooError(JsbenchError):
    """A zoo schedule that cannot be built for this backbone, or a malformed schedule file."""


# ---------------------------------------------------------------------------------------------------
# the backbone's clock
# ---------------------------------------------------------------------------------------------------


@dataclass
class Clock:
    """How the policy's clock u (what `sample` takes) relates to the sigma diffusers' formulas act on.

    `native` are the N+1 native sigmas of the backbone's default N-step schedule (the last one 0).
    """

    steps: int
    native: torch.Tensor  # [N+1] float64, native sigma
    from_native: Callable[[torch.Tensor], torch.Tensor]
    config_min: float | None = None  # a scheduler config's own sigma_min / sigma_max, which diffusers prefers
    config_max: float | None = None

    @property
    def sigma_max(self) -> float:
        return float(self.config_max if self.config_max is not None else self.native[0])

    @property
    def sigma_min(self) -> float:
        return float(self.config_min if self.config_min is not None else self.native[-2])

    def row(self, levels: torch.Tensor, what: str) -> torch.Tensor:
        """N native levels (decreasing) + the final 0 -> a [N+1] float32 row on the policy clock."""
        levels = levels.to(torch.float64)
        if levels[0] > self.native[0] * (1 + 1e-6):
            raise ZooError(
                f"{what}: its first noise level {levels[0].item():.4g} lies above the start of this backbone's "
                f"{self.steps}-step schedule ({self.native[0].item():.4g}), where every schedule here starts"
            )
        u = self.from_native(levels)
        u[0] = 1.0  # the first level is the start (equal up to round-off, checked above)
        row = torch.cat([u, torch.zeros(1, dtype=torch.float64)]).to(torch.float32)
        try:
            check_sigmas(row[None])
        except ScheduleError as exc:
            raise ZooError(f"{what} is not a valid {self.steps}-step schedule on this backbone: {exc}") from None
        return row


def _is_discrete(backbone) -> bool:
    """A backbone on a discrete (VE-sigma) scheduler, which offers `base.DiscreteClock`'s calls (SD-XL)."""
    return backbone.clock_kind == "discrete"


def clock(backbone, steps: int) -> Clock:
    """The backbone's clock at N steps: flow time (analytic, SD3, Flux) or SD-XL's VE sigma."""
    default = backbone.default_sigmas(steps, torch.zeros(1, 1))[0].detach().to("cpu", torch.float64)
    if _is_discrete(backbone):
        from jsbench.backbones.sdxl_clock import flow_sigmas_from_ve

        ve_start = float(backbone.ve_start(steps))
        native = backbone.ve_sigmas(default[None].to(torch.float32))[0].detach().to("cpu", torch.float64)

        def from_native(s: torch.Tensor) -> torch.Tensor:
            return flow_sigmas_from_ve(s, ve_start)

        config_min, config_max = backbone.scheduler_sigma_range()
        return Clock(steps, native, from_native, config_min, config_max)
    return Clock(steps, default, lambda s: s.to(torch.float64).clone())


# ---------------------------------------------------------------------------------------------------
# families: karras, exponential, beta, ays
# ---------------------------------------------------------------------------------------------------


def _parse_numbers(spec: str, arg: str, count: int, example: str) -> list[float]:
    parts = [p.strip() for p in arg.split(",")] if arg else []
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != count or not all(math.isfinite(v) and v > 0 for v in values):
        raise ZooError(f"bad schedule {spec!r}: give {count} positive number{'s' * (count > 1)}, e.g. {example}")
    return values


def family_sigmas(backbone, spec: str, steps: int) -> tuple[torch.Tensor, str]:
    """(row [N+1] float32 on the policy clock, label) of `karras[:rho]`, `exponential` or `beta[:a,b]`."""
    kind, _, arg = spec.partition(":")
    ck = clock(backbone, steps)
    hi, lo = ck.sigma_max, ck.sigma_min
    if kind == "karras":
        rho = _parse_numbers(spec, arg, 1, "karras:7")[0] if arg else 7.0
        levels, label = karras_levels(hi, lo, steps, rho), "karras" if rho == 7.0 else f"karras (rho {rho:g})"
    elif kind == "exponential":
        if arg:
            raise ZooError(f"bad schedule {spec!r}: exponential takes no parameter")
        levels, label = exponential_levels(hi, lo, steps), "exponential"
    elif kind == "beta":
        a, b = _parse_numbers(spec, arg, 2, "beta:0.6,0.6") if arg else (0.6, 0.6)
        levels, label = beta_levels(hi, lo, steps, a, b), "beta" if (a, b) == (0.6, 0.6) else f"beta ({a:g}, {b:g})"
    else:
        raise ZooError(f"{kind!r} is not a schedule family (karras, exponential, beta)")
    return ck.row(levels, label), label


def _ays_backbones() -> list[str]:
    """The registered backbones whose class declares an Align Your Steps schedule (`ays_schedule`)."""
    from jsbench.backbones import available_backbones, backbone_class

    classes = {name: backbone_class(name) for name in available_backbones()}
    return sorted(name for name, cls in classes.items() if cls is not None and cls.ays_schedule is not None and cls.clock_kind == "discrete")


def ays_sigmas(backbone, steps: int) -> torch.Tensor:
    """Align Your Steps on this backbone's clock, [N+1] float32.

    The 10-step schedule is diffusers' `AysSchedules` entry (its final 0 replaces the smallest trained
    noise level, sigma(tau = 0) = 0.0292 for SD-XL, which the AYS authors list). Other budgets use the
    authors' recipe: log-linear interpolation of the 11 levels to N+1 points, the last set to 0. AYS starts
    at the largest trained noise level; on this backbone's clock every schedule starts where the
    pipeline's own N-step schedule starts (SD-XL's "leading" spacing starts below tau = 999), so the
    first level is pinned to that start and the rest are run as given. A budget whose second level would
    lie at or above the start is refused.
    """
    key = backbone.ays_schedule
    if key is None or not _is_discrete(backbone):
        have = ", ".join(_ays_backbones())
        raise ZooError(f"ays: diffusers' AysSchedules has no schedule for {backbone.name} (only {have}); try karras, oss or searched")
    from diffusers.schedulers import AysSchedules

    listed = [float(v) for v in AysSchedules[key]]
    if listed[-1] != 0.0:
        raise ZooError(f"ays: diffusers' {key} does not end at 0: {listed}")
    floor = float(backbone.table[0])  # the smallest trained noise level (tau = 0)
    levels = torch.tensor(listed[:-1] + [floor], dtype=torch.float64)
    points = levels if steps + 1 == levels.numel() else loglinear_interp(levels, steps + 1)
    ck = clock(backbone, steps)
    points = points[:-1].clone()  # the final level becomes 0
    points[0] = ck.native[0]  # AYS starts at the largest level; here, at the pipeline's N-step start
    if steps > 1 and points[1] >= points[0]:
        raise ZooError(
            f"ays: at {steps} steps its second noise level {points[1].item():.4g} is not below this backbone's "
            f"{steps}-step start {points[0].item():.4g} ({backbone.timestep_spacing!r} spacing)"
        )
    return ck.row(points, "ays")


# ---------------------------------------------------------------------------------------------------
# file:PATH
# ---------------------------------------------------------------------------------------------------


@dataclass
class ScheduleFile:
    """A user's schedule file: one row for every prompt, or a row per prompt ([N+1] float32 each)."""

    path: Path
    steps: int
    shared: torch.Tensor | None
    per_prompt: dict[str, torch.Tensor]

    def rows_for(self, prompts: list[str]) -> torch.Tensor:
        if self.shared is not None:
            return self.shared.expand(len(prompts), -1).clone()
        missing = [p for p in prompts if p not in self.per_prompt]
        if missing:
            more = f" (and {len(set(missing)) - 1} more)" if len(set(missing)) > 1 else ""
            raise ZooError(f"{self.path}: no schedule for prompt {missing[0]!r}{more}; a per-prompt file must cover every evaluated prompt")
        return torch.stack([self.per_prompt[p] for p in prompts])

    def checksum(self) -> str:
        payload = [None if self.shared is None else self.shared.tolist(), {k: v.tolist() for k, v in sorted(self.per_prompt.items())}]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:16]


def _validate_row(values: list, steps: int, where: str) -> torch.Tensor:
    if not isinstance(values, list):
        raise ZooError(f"{where}: expected a list of sigmas, got {type(values).__name__}")
    nums = []
    for k, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise ZooError(f"{where}: sigma {k} is {v!r}, not a finite number")
        nums.append(float(v))
    if len(nums) != steps + 1:
        raise ZooError(f"{where}: {len(nums)} sigmas make {len(nums) - 1} steps, but --steps is {steps} (give {steps + 1} sigmas from 1 to 0)")
    if abs(nums[0] - 1.0) > 1e-6:
        raise ZooError(f"{where}: the first sigma is {nums[0]:g}; every schedule starts at 1 (pure noise)")
    if nums[-1] != 0.0:
        raise ZooError(f"{where}: the last sigma is {nums[-1]:g}; every schedule ends at 0 (the clean image)")
    for k in range(1, len(nums)):
        if not nums[k] < nums[k - 1]:
            raise ZooError(f"{where}: sigma {k} ({nums[k]:g}) is not below sigma {k - 1} ({nums[k - 1]:g}); sigmas must strictly decrease")
    nums[0] = 1.0
    row = torch.tensor(nums, dtype=torch.float64).to(torch.float32)
    if (row[:-1] <= row[1:]).any():
        raise ZooError(f"{where}: two sigmas are equal in float32; make every step larger than ~1e-7")
    return row


_WS = re.compile(r"\s*")


def _json_walk(text: str):
    """The parsed top level of valid JSON with the line of each value: ('list', [(v, line)]) for a list,
    ('dict', [(key, key_line, [(v, line)] | (value, line))]) for an object of lists."""
    dec = json.JSONDecoder()

    def skip(i):
        return _WS.match(text, i).end()

    def line(i):
        return text.count("\n", 0, i) + 1

    def items(i):  # i at '[' ; returns ([(value, line)], end)
        out = []
        i = skip(i + 1)
        if text[i] == "]":
            return out, i + 1
        while True:
            i = skip(i)
            value, end = dec.raw_decode(text, i)
            out.append((value, line(i)))
            i = skip(end)
            if text[i] == "]":
                return out, i + 1
            i += 1  # ','

    i = skip(0)
    if text[i] == "[":
        return "list", items(i)[0], line(i)
    if text[i] == "{":
        entries = []
        i = skip(i + 1)
        if text[i] == "}":
            return "dict", entries, line(i)
        while True:
            i = skip(i)
            key, end = dec.raw_decode(text, i)
            key_line = line(i)
            i = skip(skip(end) + 1)  # past ':'
            if text[i] == "[":
                value, i = items(i)
            else:
                raw, i = dec.raw_decode(text, i)
                value = (raw, line(i))
            entries.append((key, key_line, value))
            i = skip(i)
            if text[i] == "}":
                return "dict", entries, 1
            i += 1
    return "other", None, line(i)


def _read_json(path: Path, text: str, steps: int) -> ScheduleFile:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ZooError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    kind, body, first_line = _json_walk(text)
    if kind == "list":
        if body and all(isinstance(v, list) for v, _ in body):
            raise ZooError(f"{path}:{first_line}: a list of lists has no prompts; give one list of sigmas, or an object {{prompt: [sigmas]}}")
        for k, (v, ln) in enumerate(body):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ZooError(f"{path}:{ln}: sigma {k} is {v!r}, not a finite number")
        return ScheduleFile(path, steps, _validate_row([v for v, _ in body], steps, f"{path}:{first_line}"), {})
    if kind == "dict":
        if not body:
            raise ZooError(f"{path}:1: the object has no prompts; give {{prompt: [sigmas], ...}}")
        rows: dict[str, torch.Tensor] = {}
        lines: dict[str, int] = {}
        for key, key_line, value in body:
            where = f"{path}:{key_line}"
            if key in lines:
                raise ZooError(f"{where}: prompt {key!r} repeats line {lines[key]}; give each prompt once")
            if isinstance(value, tuple):
                raise ZooError(f"{where}: the schedule of {key!r} is {value[0]!r}, not a list of sigmas")
            for k, (v, ln) in enumerate(value):
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise ZooError(f"{path}:{ln}: sigma {k} of {key!r} is {v!r}, not a finite number")
            rows[key] = _validate_row([v for v, _ in value], steps, f"{where} ({key!r})")
            lines[key] = key_line
        return ScheduleFile(path, steps, None, rows)
    raise ZooError(f"{path}:{first_line}: expected a list of sigmas or an object {{prompt: [sigmas]}}")


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _read_csv(path: Path, text: str, steps: int) -> ScheduleFile:
    reader = csv.reader(io.StringIO(text))
    shared: list[tuple[int, torch.Tensor]] = []
    rows: dict[str, torch.Tensor] = {}
    lines: dict[str, int] = {}
    first = True
    for cells in reader:
        ln = reader.line_num
        cells = [c.strip() for c in cells]
        if not any(cells):
            continue  # blank lines are allowed in CSV
        numeric = [_number(c) is not None for c in cells]
        if first and not any(numeric):
            first = False  # a header line
            continue
        first = False
        where = f"{path}:{ln}"
        if all(numeric):
            shared.append((ln, _validate_row([float(c) for c in cells], steps, where)))
        elif not numeric[0] and all(numeric[1:]) and len(cells) > 1:
            prompt = cells[0]
            if prompt in lines:
                raise ZooError(f"{where}: prompt {prompt!r} repeats line {lines[prompt]}; give each prompt once")
            rows[prompt] = _validate_row([float(c) for c in cells[1:]], steps, f"{where} ({prompt!r})")
            lines[prompt] = ln
        else:
            bad = next(k for k, ok in enumerate(numeric) if not ok and k > 0) if not all(numeric[1:]) else 0
            raise ZooError(f"{where}: column {bad + 1} ({cells[bad]!r}) is not a number; a row is `sigma_0,...,sigma_N` or `prompt,sigma_0,...,sigma_N`")
    if shared and rows:
        raise ZooError(f"{path}:{shared[0][0]}: a row without a prompt in a file of per-prompt rows; use one form")
    if len(shared) > 1:
        raise ZooError(f"{path}:{shared[1][0]}: a second schedule without a prompt; give one row, or `prompt,sigmas...` per row")
    if not shared and not rows:
        raise ZooError(f"{path}: no schedule in the file; give one row of sigmas from 1 to 0")
    return ScheduleFile(path, steps, shared[0][1] if shared else None, rows)


def read_schedule_file(path: str | Path, steps: int) -> ScheduleFile:
    """Read and validate a schedule file; any problem is one line naming file:line."""
    path = Path(path)
    if not path.is_file():
        raise ZooError(f"schedule file {str(path)!r} not found")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        ln = raw[: exc.start].count(b"\n") + 1
        raise ZooError(f"{path}:{ln}: not UTF-8 (byte 0x{raw[exc.start]:02x}); save the file as UTF-8") from None
    if not text.strip():
        raise ZooError(f"{path}: the file is empty; give one row of sigmas from 1 to 0")
    is_json = path.suffix.lower() == ".json" or (path.suffix.lower() != ".csv" and text.lstrip()[:1] in "[{")
    return _read_json(path, text, steps) if is_json else _read_csv(path, text, steps)


# ---------------------------------------------------------------------------------------------------
# caching
# ---------------------------------------------------------------------------------------------------


def schedules_dir() -> Path:
    """Where cached schedules live: $JSBENCH_SCHEDULES, else `<project root>/schedules`."""
    env = os.environ.get("JSBENCH_SCHEDULES")
    if env:
        return Path(env)
    from jsbench.workspace import project_dir

    return project_dir("schedules")


def _cache_path(kind: str, backbone, suite_name: str, steps: int) -> Path:
    return schedules_dir() / backbone.name / f"{kind}-{suite_name}-n{steps}.json"


def _cached(kind: str, backbone, suite_name: str, steps: int, key: dict, compute: Callable[[], tuple[torch.Tensor, dict]], log=None) -> torch.Tensor:
    """The cached row when its key matches, else compute, write atomically and return it."""
    from jsbench.io import write_text_atomic

    path = _cache_path(kind, backbone, suite_name, steps)
    if path.is_file():
        try:
            stored = json.loads(path.read_text())
            if stored.get("key") == key:
                row = torch.tensor(stored["sigmas"], dtype=torch.float32)
                check_sigmas(row[None])
                if row.numel() == steps + 1:
                    return row
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, ScheduleError):
            pass  # a damaged or stale cache is recomputed
    if log:
        log(f"{kind}: computing the {steps}-step schedule for {backbone.name} on {suite_name} (cached to {path})")
    start = time.perf_counter()
    row, info = compute()
    check_sigmas(row[None])
    payload = {"kind": kind, "backbone": backbone.name, "model_id": backbone.model_id, "suite": suite_name, "steps": steps,
               "sigmas": [float(v) for v in row.tolist()], "key": key, "seconds": round(time.perf_counter() - start, 1), **info}
    write_text_atomic(path, json.dumps(payload, indent=1) + "\n")  # creates the folder
    return row


def _spread(items: list, count: int) -> list:
    """`count` items evenly spread over the list (all of them when it is shorter), order kept."""
    if count >= len(items):
        return list(items)
    idx = torch.linspace(0, len(items) - 1, count).round().long().tolist()
    return [items[i] for i in dict.fromkeys(idx)]


def _train_items(suite, count: int) -> list:
    items = suite.items("train")
    if not items:
        raise ZooError(f"suite {suite.name} has no training prompts to compute a schedule on")
    return _spread(items, count)


# ---------------------------------------------------------------------------------------------------
# oss: Optimal Stepsize Sampling
# ---------------------------------------------------------------------------------------------------


def _velocity_fn(backbone) -> tuple[Callable, torch.dtype]:
    """(f, dtype): f(x [R, ...], sigma [R], cond) -> the flow velocity [R, ...] of the backbone's model
    (guidance included), the protocol's `velocity`, and `dtype`, the precision the backbone's own sampler keeps
    its state in (`velocity_dtype`: float64 for the embedded world, float32 otherwise)."""
    if backbone.velocity is None:
        raise ZooError(f"oss: needs the velocity of a flow-matching backbone (analytic, scenes-dit, sd35, flux); {backbone.name} has none")
    return backbone.velocity, backbone.velocity_dtype


@torch.no_grad()
def oss_search(backbone, cond, x_T: torch.Tensor, steps: int, teacher: torch.Tensor, chunk: int | None = None) -> tuple[torch.Tensor, float]:
    """Optimal Stepsize Sampling (Pu et al., bebebe666/OptimalSteps), one schedule for a batch.

    `teacher` [M+1] is the teacher's schedule (the backbone's default at M steps, 1 -> 0). The teacher
    trajectory x^T_p is Euler along it. cost(k, q) is the mean squared distance between the teacher's
    state at grid point q and the student's state there after exactly k steps, where the student's state
    at (k, q) is the one-step Euler extrapolation from the best state at (k - 1, p), p < q, the state
    that lands closest to the teacher (the reference implementation's recursion). The schedule is the
    path of (N, M): the N-step student whose endpoint best matches the teacher's. Each student path uses
    exactly N strictly decreasing grid points, so the result is valid by construction.
    Returns (sigmas [N+1] float32, endpoint cost).
    """
    from jsbench.backbones.base import eval_batch_size

    velocity, work = _velocity_fn(backbone)
    chunk = chunk or eval_batch_size(backbone)  # rows per model call: what the backbone declares fits in memory
    M = teacher.numel() - 1
    if not 1 <= steps <= M:
        raise ZooError(f"oss: {steps} student steps need a teacher with at least as many steps (teacher has {M})")
    grid = teacher.to(torch.float32).cpu().to(work)  # the float32 sigmas the sampler would run
    B = x_T.shape[0]
    x0 = x_T.to(work)

    def vel(states: torch.Tensor, sig: torch.Tensor, reps: int) -> torch.Tensor:
        out = []
        idx = torch.arange(B).repeat(reps)
        for start in range(0, states.shape[0], chunk):
            sl = slice(start, start + chunk)
            out.append(velocity(states[sl], sig[sl].to(torch.float32), cond.take(idx[sl])).to(states.device, work))
        return torch.cat(out)

    # the teacher trajectory: traj[p] is the state at grid[p]
    traj = [x0]
    for p in range(M):
        v = vel(traj[-1], grid[p].expand(B), 1)
        traj.append(traj[-1] + (grid[p + 1] - grid[p]) * v)
    traj = torch.stack(traj)  # [M+1, B, ...]
    states = {0: x0}  # level 0: only the start is reachable
    parents: list[dict[int, int]] = []
    best_cost = {0: 0.0}
    for k in range(1, steps + 1):
        last = M - (steps - k)  # leave one grid point for each remaining step
        sources = sorted(states)
        stacked = torch.cat([states[p] for p in sources])
        sig = torch.cat([grid[p].expand(B) for p in sources])
        v_all = vel(stacked, sig, len(sources)).view(len(sources), *x0.shape)
        cost = torch.full((M + 1,), float("inf"), dtype=torch.float64)
        parent: dict[int, int] = {}
        new_states: dict[int, torch.Tensor] = {}
        for si, p in enumerate(sources):
            lo = p + 1 if k < steps else M
            targets = list(range(lo, last + 1))
            if not targets:
                continue
            dt = (grid[targets] - grid[p]).view(-1, *([1] * x0.dim()))
            land = states[p][None] + dt * v_all[si][None]  # [Q, B, ...]
            c = (land - traj[targets]).pow(2).mean(dim=tuple(range(1, land.dim()))).to(torch.float64).cpu()  # one host copy, not one per target
            for qi, q in enumerate(targets):
                if c[qi] < cost[q]:
                    cost[q] = c[qi]
                    parent[q] = p
                    new_states[q] = land[qi].clone()  # a view would keep the whole [Q, B, ...] land tensor alive
        if not new_states:
            raise ZooError(f"oss: no {k}-step path on a {M}-step teacher")
        parents.append(parent)
        states = new_states
        best_cost = {q: float(cost[q]) for q in new_states}
    path = [M]
    for k in range(steps, 0, -1):
        path.append(parents[k - 1][path[-1]])
    path = path[::-1]  # grid indices from 0 (noise) to M (clean)
    row = grid[path].to(torch.float32)
    row[0], row[-1] = 1.0, 0.0
    check_sigmas(row[None])
    return row, best_cost[M]


def oss_sigmas(backbone, suite, steps: int, teacher_steps: int | None = None, prompts: int = 16, seeds: int = 2, log=None) -> torch.Tensor:
    """The cached OSS schedule of this backbone at N steps, computed on `prompts` training prompts x `seeds`."""
    if suite is None:
        raise ZooError("oss is computed on a suite's training prompts; this command has no suite")
    M = int(teacher_steps or backbone.ceiling_steps)
    if M < steps:
        raise ZooError(f"oss: the teacher ({M} steps) must have at least the student's {steps} steps")
    items = _train_items(suite, prompts)
    seed_list = list(range(50_000, 50_000 + seeds))
    teacher = backbone.default_sigmas(M, torch.zeros(1, 1))[0].detach().cpu()
    key = {"model_id": backbone.model_id, "teacher_steps": M, "teacher": _digest(teacher), "prompts": [it.prompt for it in items],
           "seeds": seed_list, "version": 1}

    def compute():
        rows = [(it.prompt, s) for it in items for s in seed_list]
        cond = backbone.encode([p for p, _ in rows])
        x_T = backbone.initial_noise([s for _, s in rows])
        row, cost = oss_search(backbone, cond, x_T, steps, teacher)
        return row, {"endpoint_mse": cost, "method": "OSS (Pu et al. 2025): DP over the teacher's timesteps"}

    return _cached("oss", backbone, suite.name, steps, key, compute, log)


def _digest(t: torch.Tensor) -> str:
    return hashlib.sha256(json.dumps([round(float(v), 7) for v in t.tolist()]).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------
# searched: the best global schedule for the suite's metric
# ---------------------------------------------------------------------------------------------------


def _score_schedules(backbone, suite, items: list, seeds: list[int], schedules: torch.Tensor, batch: int) -> torch.Tensor:
    """The suite's headline number (primary metric, task-mean 'overall') of each schedule, [C]."""
    rows = [(it, s) for it in items for s in seeds]
    row_items = [it for it, _ in rows]
    metric = suite.primary_metric
    out = torch.zeros(len(schedules), dtype=torch.float64)
    cache = []
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        cache.append((backbone.encode([it.prompt for it, _ in chunk]), backbone.initial_noise([s for _, s in chunk])))
    for c, sig in enumerate(schedules):
        scores = []
        for start, (cond, x_T) in zip(range(0, len(rows), batch), cache):
            chunk_items = row_items[start : start + batch]
            images = backbone.sample(x_T, cond, sig.to(x_T.device).expand(x_T.shape[0], -1).contiguous())
            scores += suite.score(images, chunk_items)
        overall = [m for m in suite.aggregate(scores, row_items) if m.task == "overall" and m.metric == metric]
        out[c] = overall[0].value if overall else float("nan")
    return out


def search_global_schedule(
    backbone, suite, steps: int, items: list, seeds: list[int], grid_points: int = 8, shifts: int = 8,
    random_count: int = 24, sweeps: int = 1, refine_points: int = 4, batch: int = 256, log=None,
) -> tuple[torch.Tensor, dict]:
    """Grid then coordinate search for the schedule with the best suite score on (items x seeds).

    The grid is `schedule.candidate_schedules` plus the backbone's default; each coordinate sweep then
    tries, for every interior sigma in turn, `refine_points` values spread between its neighbours and
    keeps the best (ties keep the current one, so the search is deterministic)."""
    cands = candidate_schedules(steps, random_count=random_count, grid_points=grid_points, shifts=shifts)
    default = backbone.default_sigmas(steps, torch.zeros(1, 1))[0].detach().cpu().to(torch.float32)
    cands = torch.cat([default[None], cands])
    scores = _score_schedules(backbone, suite, items, seeds, cands, batch)
    best_i = int(torch.nan_to_num(scores, nan=-1.0).argmax())
    best, best_score = cands[best_i].clone(), float(scores[best_i])
    evaluated = len(cands)
    for _ in range(sweeps):
        for j in range(1, steps):
            hi, lo = float(best[j - 1]), float(best[j + 1])
            trial = torch.linspace(hi, lo, refine_points + 2, dtype=torch.float64)[1:-1]
            trials = best.expand(refine_points, -1).clone()
            trials[:, j] = trial.to(torch.float32)
            trials = torch.stack([t for t in trials if bool((t[:-1] > t[1:]).all())]) if len(trials) else trials
            if not len(trials):
                continue
            s = _score_schedules(backbone, suite, items, seeds, trials, batch)
            evaluated += len(trials)
            k = int(torch.nan_to_num(s, nan=-1.0).argmax())
            if float(s[k]) > best_score:
                best, best_score = trials[k].clone(), float(s[k])
        if log:
            log(f"searched: sweep done, best {best_score:.3f}")
    return best, {"train_score": best_score, "default_train_score": float(scores[0]), "evaluated": evaluated}


def searched_sigmas(backbone, suite, steps: int, prompts: int = 48, seeds: int = 2, log=None, **search) -> torch.Tensor:
    """The cached searched global schedule of this backbone and suite at N steps (training prompts)."""
    if suite is None:
        raise ZooError("searched is scored on a suite's training prompts; this command has no suite")
    items = _train_items(suite, prompts)
    seed_list = list(range(60_000, 60_000 + seeds))
    settings = dict(SEARCH_SETTINGS)
    settings.update({k: v for k, v in search.items() if k in settings})
    key = {"model_id": backbone.model_id, "metric": suite.primary_metric, "prompts": [it.prompt for it in items],
           "seeds": seed_list, "search": settings, "version": 1}
    batch = int(backbone.eval_batch or 512)

    def compute():
        return search_global_schedule(backbone, suite, steps, items, seed_list, batch=batch, log=log, **settings)

    return _cached("searched", backbone, suite.name, steps, key, compute, log)


# ---------------------------------------------------------------------------------------------------
# one entry point for evaluate.resolve_schedule
# ---------------------------------------------------------------------------------------------------


def zoo_source_row(spec: str, backbone, steps: int, suite=None, log=None):
    """(label, make(x_T, cond) -> [B, N+1], checksum) of a zoo `--schedule` spec."""
    kind, _, arg = spec.partition(":")
    if kind in ("karras", "exponential", "beta"):
        row, label = family_sigmas(backbone, spec, steps)
    elif kind == "ays":
        if arg:
            raise ZooError(f"bad schedule {spec!r}: ays takes no parameter")
        row, label = ays_sigmas(backbone, steps), "ays"
    elif kind == "oss":
        teacher = None
        if arg:
            if not arg.isdigit() or int(arg) < 1:
                raise ZooError(f"bad schedule {spec!r}: oss:M takes the teacher's step count, e.g. oss:200")
            teacher = int(arg)
        row, label = oss_sigmas(backbone, suite, steps, teacher_steps=teacher, log=log), "oss"
    elif kind == "searched":
        if arg:
            raise ZooError(f"bad schedule {spec!r}: searched takes no parameter")
        row, label = searched_sigmas(backbone, suite, steps, log=log), "searched"
    elif kind == "file":
        if not arg:
            raise ZooError(f"bad schedule {spec!r}: give a path, e.g. file:my_schedule.json")
        sf = read_schedule_file(arg, steps)

        def make_file(x, c, sf=sf):
            return sf.rows_for(list(c.prompts)).to(x.device, torch.float32)

        return f"file:{Path(arg).name}", make_file, sf.checksum()
    else:
        raise ZooError(f"{kind!r} is not a zoo schedule ({', '.join(ZOO_KINDS)})")
    checksum = _digest(row)

    def make(x, c, row=row):
        return row.to(x.device, torch.float32).expand(x.shape[0], -1).clone()

    return label, make, checksum


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
        if kind not in ZOO_KINDS:
            raise ZooError(f"--zoo: {token!r} is not a zoo schedule; use a comma-separated list of {', '.join(ZOO_KINDS[:-1])}, or none")
        out.append(token)
    return out


def zoo_rows(specs: list[str], backbone, steps: int, log=None) -> list[str]:
    """The zoo specs that exist for this backbone at N steps: ays only where the family has one (and the
    budget fits its clock), oss only where the backbone has a flow velocity; each skip is logged."""
    keep = []
    for spec in specs:
        kind = spec.partition(":")[0]
        try:
            if kind == "ays":
                ays_sigmas(backbone, steps)
            elif kind == "oss":
                _velocity_fn(backbone)
        except ZooError as exc:
            if log:
                log(f"  skipping {spec}: {exc}")
            continue
        keep.append(spec)
    return keep

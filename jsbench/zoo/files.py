"""`file:PATH`: the user's schedule(s), JSON or CSV, one sigma list or one per prompt."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from jsbench.zoo.clock import ZooError
from jsbench.zoo.registry import register_zoo

__all__ = ["ScheduleFile", "read_schedule_file"]


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



@register_zoo("file")
def _build(spec: str, backbone, steps: int, suite=None, log=None):
    arg = spec.partition(":")[2]
    if not arg:
        raise ZooError(f"bad schedule {spec!r}: give a path, e.g. file:my_schedule.json")
    sf = read_schedule_file(arg, steps)

    def make(x, c):
        return sf.rows_for(list(c.prompts)).to(x.device, torch.float32)

    return f"file:{Path(arg).name}", make, sf.checksum()

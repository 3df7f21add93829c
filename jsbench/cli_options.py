"""How the `jsbench` command line builds its typer options: the --help panels, the output formats, the backbone
options several commands share, and a command's options from a config dataclass's fields (`config_options`).
Declarations only: no command runs here, and nothing here imports torch, so --help stays fast."""

from __future__ import annotations

import inspect
from enum import Enum
from typing import List, Optional

import typer

from jsbench.report.compare_request import IMAGES_BATCH_HELP, PROGRESS_HELP
from jsbench.train.config import DECODE_HELP, DEVICE_HELP, DTYPE_HELP, GUIDANCE_HELP, MODEL_HELP, OFFLOAD_HELP, OFFLOAD_MODE_HELP


def show_flags_bare() -> None:
    """typer's rich help tags every option with its type, flags (`--resume/--no-resume`, `--help`) as `<bool>`,
    though a flag takes no value; show flags bare, as its plain-text help does, and a bounded int as
    `<int> [x>=1]` rather than `<int range> [x>=1]` (narrower columns at 80 columns)."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_jsbench", False):
        return

    def display_type_rich(self, ctx):
        if self.is_flag and not self.count:
            return None
        text = shown(self, ctx)
        return "<int>" if text == "<int range>" else text  # "<int> [x>=1]": the bounds say it is a range

    display_type_rich._jsbench = True
    TyperOption.display_type_rich = display_type_rich


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


# --help groups each command's options into these panels
RUN, OUT, BACKBONE, TRAINING, OPTIMIZER, CHECK, PLAN = "Run", "Output", "Backbone", "Training", "Optimizer", "Check (--check)", "Plan (--plan)"
ROOT_HELP = "the nearest folder at or above the current one holding policies/ or leaderboards/, else the checkout jsbench is installed from"


class SizeFormat(str, Enum):
    table = "table"
    json = "json"


# the backbone options of eval, compare and schedules plot, declared once: name -> typer.Option's arguments (the
# dtype, offload and decode-chunk helps are also those of train's TrainConfig fields)
BACKBONE_OPTIONS = {
    "model": dict(default=None, help=MODEL_HELP, rich_help_panel=BACKBONE),
    "batch_size": dict(default=None, flags=("--batch-size",), min=1, help=IMAGES_BATCH_HELP, rich_help_panel=BACKBONE),
    "device": dict(default=None, help=DEVICE_HELP, rich_help_panel=BACKBONE),
    "dtype": dict(default=None, help=DTYPE_HELP, rich_help_panel=BACKBONE),
    "offload": dict(default=False, flags=("--offload",), help=OFFLOAD_HELP, rich_help_panel=BACKBONE),
    "decode_chunk": dict(default=None, flags=("--decode-chunk",), min=1, help=DECODE_HELP, rich_help_panel=BACKBONE),
    "progress": dict(default=True, help=PROGRESS_HELP, rich_help_panel=OUT),
    "guidance": dict(default=None, help=GUIDANCE_HELP, rich_help_panel=BACKBONE),
    "offload_mode": dict(default=None, flags=("--offload-mode",), help=OFFLOAD_MODE_HELP, rich_help_panel=BACKBONE),
}


def backbone_option(name: str, **override):
    """A new typer.Option for backbone option `name` (each command gets its own), `override` replacing its arguments."""
    spec = {**BACKBONE_OPTIONS[name], **override}
    return typer.Option(spec.pop("default"), *spec.pop("flags", ()), **spec)


def config_options(config_cls, panels: dict[str, str] | None = None) -> list[inspect.Parameter]:
    """A typer option per field of a config dataclass (TrainConfig, CompareRequest), built from the field's
    metadata (see jsbench/train/config.py): `help` (required), `flags` (default --field-name), `choices` (an
    enum of the values, whose `.value` the command passes on), `min`. The field's default is the option's; a
    `tuple[X, ...]` field is a repeatable option (typer passes a list). `panels` (field -> --help panel)
    groups them, the fields it does not name under "Options"."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        meta = f.metadata
        if not meta.get("help"):
            raise TypeError(f"{config_cls.__name__}.{f.name} has no help: declare it with metadata={{'help': ...}}")
        annotation, default = hints[f.name], f.default
        if meta.get("choices"):
            annotation = Enum(f"{f.name.title()}Choice", {c: c for c in meta["choices"]}, type=str)
            default = annotation(default)
        elif type(None) in typing.get_args(annotation):  # `X | None`, as typer reads it
            annotation = Optional[next(a for a in typing.get_args(annotation) if a is not type(None))]
        elif typing.get_origin(annotation) is tuple:  # `tuple[X, ...]`: the option repeated
            annotation, default = List[typing.get_args(annotation)[0]], list(default)
        extra = {"min": meta["min"]} if "min" in meta else {}
        if meta.get("metavar"):
            extra["metavar"] = meta["metavar"]  # instead of the choices, where they would widen the panel's column
        if meta.get("hidden"):
            extra["hidden"] = True  # accepted, not listed: an option kept for repeating older runs
        if panels and f.name in panels:
            extra["rich_help_panel"] = panels[f.name]
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                     default=typer.Option(default, *meta.get("flags", ()), help=meta["help"], **extra)))
    return out


def keyword_option(name: str, annotation, default) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)

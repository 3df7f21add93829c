"""A training run's configuration, with each field's command-line help beside it.

`jsbench train` builds its options from these fields (jsbench/cli_options.py, `config_options`): a field added
here is an option there, with its name (`--field-name`), default and help, and nothing else to touch.
The metadata of a field: `help` (required), `flags` (the option's names when not just `--field-name`,
e.g. a short flag, or a bare `--flag` for a bool without `--no-flag`), `choices` (the allowed values),
`min` (the smallest allowed number), `hidden` (accepted, not listed in --help), `metavar` (the value's name in
--help, e.g. where listing the choices would widen the panel's option column).

This module imports nothing heavy (no torch), so `jsbench --help` stays fast; jsbench.train.reinforce re-exports
TrainConfig beside the Trainer that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jsbench.registry import declared_names, declared_records, plugin_entries  # read without importing torch


def baseline_help() -> str:
    """--baseline's choices, from the baselines' records (baselines.py, read without importing torch) and the
    installed plugins' entry points (not loaded): 'none, rloo, ..., js (-B >= 3), js-plugin (-B >= 3) or jspo (-B >= 2)'."""
    records = declared_records("jsbench.baselines", "BASELINES")
    words = [r["name"] + (f" (-B >= {r['min_contexts']})" if r.get("min_contexts", 1) > 1 else "") for r in records]
    words += [e.name for e in plugin_entries("jsbench.baselines") if e.name not in {r["name"] for r in records}]
    return ", ".join(words[:-1]) + " or " + words[-1]


def option(default, help: str, **metadata):
    """A config field with its command-line help (and `flags`, `choices`, `min`)."""
    return field(default=default, metadata={"help": help, **metadata})


MODEL_HELP = "Hub id or local folder of the backbone's weights."
DEVICE_HELP = "cpu, cuda, cuda:N (default: the backbone's choice)."
DTYPE_HELP = "bf16, fp16 or fp32 (default: bf16 on CUDA, else fp32)."
OFFLOAD_HELP = "Each network on the GPU only while it runs (24-48 GB)."
OFFLOAD_MODE_HELP = "text, model or sequential (README)."
GUIDANCE_HELP = "Guidance scale (recorded)."
BATCH_HELP = "Rows per sampler call (default: the backbone's)."
DECODE_HELP = "Images per VAE decode (default: the backbone's)."


@dataclass
class TrainConfig:
    backbone: str = option("analytic", f"Backbone: {', '.join(declared_names('jsbench.backbones'))}.")
    model: str | None = option(None, MODEL_HELP)
    steps: int = option(5, "Step budget N (N increments).")
    baseline: str = option("js", f"{baseline_help()}.")
    reward: str = option("geneval", f"Reward: {', '.join(declared_names('jsbench.rewards'))}.")
    suite: str = option("geneval", f"Training prompts' suite: {', '.join(declared_names('jsbench.suites'))}.")
    ocr_protocol: str | None = option(None, "OCR reading: words or mario.", flags=("--ocr-protocol",))  # held-out scores
    prompts_file: str | None = option(None, "ocr: text prompts, one a line (every 4th held out).", metavar="<path>")
    policy: str = option("instance", "instance, prompt, global, tpdm or indis (docs/peer-methods.md).",
                         choices=("instance", "prompt", "global", "tpdm", "indis"), metavar="<kind>")
    iters: int = option(200, "Policy updates.")
    contexts: int = option(16, "Contexts (prompt, noise) per update.", flags=("--contexts", "-B"))
    samples: int = option(4, "Schedules per context.", flags=("--samples", "-K"))
    lr: float = option(1e-2, "Learning rate of the shared schedule.")
    network_lr: float = option(1e-3, "Learning rate of the conditioning network.")
    weight_decay: float = option(0.0, "AdamW weight decay.")
    grad_clip: float = option(1.0, "Largest gradient norm of an update.")
    concentration: float = option(32.0, "Initial Dirichlet concentration c0.")
    width: int | None = option(None, "Hidden width (default: 128; xattn 512).", min=1)
    policy_arch: str = option("auto", "small, xattn or auto (README).", choices=("auto", "small", "xattn"))
    seed: int = option(0, "Seed of the whole run.", min=0)
    checkpoint_every: int = option(25, "Updates per checkpoint.")
    heldout_prompts: int = option(64, "Prompts held out (0: none).", min=0, flags=("--heldout",))
    heldout_every: int | None = option(None, "Updates per held-out score.", min=1)
    # runs trained before seeds drew their own noise (every seed the stream of seed 0) are repeated with
    # `--noise-stream shared`, which their manifests record; hidden from --help, no new run should use it
    noise_stream: str = option("per-seed", "Training noise: per-seed, or shared (older runs).", choices=("per-seed", "shared"), hidden=True)
    device: str | None = option(None, DEVICE_HELP)
    dtype: str | None = option(None, DTYPE_HELP)  # the backbone's dtype; the policy is always fp32
    offload: bool = option(False, OFFLOAD_HELP, flags=("--offload",))  # one network on the GPU at a time
    batch_size: int | None = option(None, BATCH_HELP, min=1)  # does not change B or K
    decode_chunk: int | None = option(None, DECODE_HELP, min=1)
    # float sums (matmul reductions) depend on the thread count: a run is repeatable to the bit only with the
    # same count, so the manifest records it and its command names it
    threads: int | None = option(None, "CPU threads (recorded).", min=1)
    offload_mode: str | None = option(None, OFFLOAD_MODE_HELP, flags=("--offload-mode",))  # checked when the backbone loads
    guidance: float | None = option(None, GUIDANCE_HELP)  # the backbone's guidance scale (real backbones)
    recipe: str | None = option(None, "Preset: paper (README).")


# the fields `train_command` always names, so a manifest's command reads on its own
_NAMED_FIELDS = ("backbone", "steps", "baseline", "policy", "reward", "suite", "iters", "contexts", "samples", "seed")


def train_command(config: TrainConfig, out: str) -> str:
    """The `jsbench train` command that repeats `config` into `out`: the named fields, then every field that
    differs from its default."""
    from dataclasses import fields

    parts = ["jsbench train"]
    for f in fields(TrainConfig):
        # the option's own first name, as cli_options.config_options declares it
        value, flag = getattr(config, f.name), f.metadata.get("flags", ("--" + f.name.replace("_", "-"),))[0]
        if f.name not in _NAMED_FIELDS and value == f.default:
            continue
        if isinstance(value, bool):
            parts.append(flag if value else f"--no-{flag[2:]}")
        elif value is not None:
            parts.append(f"{flag} {value}")
    parts.append(f"--out {out}")
    return " ".join(parts)

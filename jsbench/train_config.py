"""A training run's configuration, with each field's command-line help beside it.

`jsbench train` builds its options from these fields (jsbench/cli.py, `config_options`): a field added
here is an option there, with its name (`--field-name`), default and help, and nothing else to touch.
The metadata of a field: `help` (required), `flags` (the option's names when not just `--field-name`,
e.g. a short flag, or a bare `--flag` for a bool without `--no-flag`), `choices` (the allowed values),
`min` (the smallest allowed number).

This module imports nothing heavy (no torch), so `jsbench --help` stays fast; jsbench.train re-exports
TrainConfig beside the Trainer that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def option(default, help: str, **metadata):
    """A config field with its command-line help (and `flags`, `choices`, `min`)."""
    return field(default=default, metadata={"help": help, **metadata})


MODEL_HELP = "Hub id or local folder of the backbone's weights."
DEVICE_HELP = "torch device, e.g. cpu, cuda, cuda:1 (default: cpu for analytic, cuda if available otherwise)."
DTYPE_HELP = "Backbone dtype: bf16, fp16 or fp32 (default: bf16 on CUDA, fp32 on CPU). The policy and its schedules stay fp32."
OFFLOAD_HELP = "Keep the backbone's networks on the CPU and move each to the GPU while it runs (diffusers' model CPU offload; README: which card needs which flags)."
BATCH_HELP = "Rows per sampler call within an update (default: the backbone's train batch; B and K are unchanged)."
OFFLOAD_MODE_HELP = "text (text encoders on the CPU), model (= --offload) or sequential; see README."
GUIDANCE_HELP = "Guidance scale (default: the pipeline's own); recorded with the results."
DECODE_HELP = "Images per VAE decode call (default: the backbone's; a 1024^2 image peaks at ~1.4 GiB in bf16)."


@dataclass
class TrainConfig:
    backbone: str = option("analytic", "Backbone name (analytic, sdxl, sd35-medium, flux-dev, ...).")
    model: str | None = option(None, MODEL_HELP)
    steps: int = option(5, "Step budget N: the policy outputs N increments.")
    baseline: str = option("js", "Reward baseline: none, rloo, xctx, js (James–Stein, Efron–Morris; needs --contexts >= 3) or js-plugin (the paper's plug-in, for comparison).")
    reward: str = option("geneval", "Reward to maximise (geneval, ocr, ...).")
    suite: str = option("geneval", "Suite whose training prompts are used.")
    policy: str = option("instance", "instance: prompt + noise; prompt: prompt only; global: one schedule.", choices=("instance", "prompt", "global"))
    iters: int = option(200, "Number of policy updates.")
    contexts: int = option(16, "Contexts (prompt, seed) per update.", flags=("--contexts", "-B"))
    samples: int = option(4, "Schedules sampled per context.", flags=("--samples", "-K"))
    lr: float = option(1e-2, "AdamW learning rate of the shared schedule (global alpha / output bias).")
    network_lr: float = option(1e-3, "AdamW learning rate of the conditioning network (instance policies).")
    weight_decay: float = option(0.0, "AdamW weight decay of the policy's parameters.")
    grad_clip: float = option(1.0, "Largest gradient norm of an update; a larger one is scaled down to it.")
    concentration: float = option(32.0, "Initial Dirichlet concentration c0 (alpha = c0 * default increments).")
    width: int | None = option(None, "Hidden width of the conditioning network (default: 128; xattn: 512 on image and token latents).", min=1)
    policy_arch: str = option("auto", "small (pooled prompt + noise, an MLP) or xattn (noise features cross-attend to the prompt's tokens); auto: xattn on real backbones, small on the embedded worlds.", choices=("auto", "small", "xattn"))
    seed: int = option(0, "Seed of everything random in the run.")
    checkpoint_every: int = option(25, "Updates between atomic checkpoints.")
    device: str | None = option(None, DEVICE_HELP)
    dtype: str | None = option(None, DTYPE_HELP)  # the backbone's dtype; the policy is always fp32
    offload: bool = option(False, OFFLOAD_HELP, flags=("--offload",))  # one network on the GPU at a time
    batch_size: int | None = option(None, BATCH_HELP, min=1)  # does not change B or K
    decode_chunk: int | None = option(None, DECODE_HELP, min=1)
    # float sums (matmul reductions) depend on the thread count: a run is repeatable to the bit only with the
    # same count, so the manifest records it and its command names it
    threads: int | None = option(None, "CPU threads for torch (default: torch's own). Recorded: exact repeats need the same count.", min=1)
    offload_mode: str | None = option(None, OFFLOAD_MODE_HELP, flags=("--offload-mode",))  # checked when the backbone loads
    guidance: float | None = option(None, GUIDANCE_HELP)  # the backbone's guidance scale (real backbones)


# the fields `train_command` always names, so a manifest's command reads on its own
_NAMED_FIELDS = ("backbone", "steps", "baseline", "policy", "reward", "suite", "iters", "contexts", "samples", "seed")


def train_command(config: TrainConfig, out: str) -> str:
    """The `jsbench train` command that repeats `config` into `out`: the named fields, then every field that
    differs from its default."""
    from dataclasses import fields

    parts = ["jsbench train"]
    for f in fields(TrainConfig):
        # the option's own first name, as cli.config_options declares it
        value, flag = getattr(config, f.name), f.metadata.get("flags", ("--" + f.name.replace("_", "-"),))[0]
        if f.name not in _NAMED_FIELDS and value == f.default:
            continue
        if isinstance(value, bool):
            parts.append(flag if value else f"--no-{flag[2:]}")
        elif value is not None:
            parts.append(f"{flag} {value}")
    parts.append(f"--out {out}")
    return " ".join(parts)

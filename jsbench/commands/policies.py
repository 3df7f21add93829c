"""`jsbench policies list|size|show`: the trained policies under a folder, the policy train builds at full size,
and one policy's manifest verified against its weights."""

from __future__ import annotations

import sys

from jsbench.cli_options import OutputFormat, SizeFormat


def list_policies_command(*, root, fmt, console) -> int:
    """What `jsbench policies list` does with its options; the exit code."""
    from jsbench.commands import tables
    from jsbench.policy.schedule_policy import list_policies
    from jsbench.workspace import display_path, project_dir

    root = root or project_dir("policies")
    rows = list_policies(root)
    if fmt != OutputFormat.table:
        sys.stdout.write(tables.rows_text(fmt.value, tables.POLICY_COLUMNS, rows))
        return 0
    console.print(tables.policies_table(rows, display_path(root)))
    return 0


def policy_size_command(*, backbone, steps, policy_arch, fmt, console) -> int:
    """What `jsbench policies size` does with its options; the exit code."""
    import json

    from jsbench.backbones.full_size import component_sizes
    from jsbench.policy.size import full_size_name, policy_size

    row = policy_size(backbone, steps, policy_arch)
    row["backbone_params"] = component_sizes(full_size_name(backbone))  # the full-size pipeline's weights beside the policy
    if fmt == SizeFormat.json:
        sys.stdout.write(json.dumps(row) + "\n")
        return 0
    sizes = row["backbone_params"]
    count = lambda n: f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"  # noqa: E731
    encoders = ", ".join(f"{name} {count(n)}" for name, n in sizes["text_encoders"].items())
    console.print(f"{row['backbone']} at {row['steps']} steps, arch {row['arch']} (width {row['width']}, depth {row['depth']})")
    console.print(f"  parameters     {row['params'] / 1e6:.2f}M")
    console.print(f"  reads          {', '.join(row['reads'])}")
    console.print(f"  GFLOPs per row {row['gflops_per_row']:.2f}  ({100 * row['sampler_share']:.4f}% of one sampling)")
    console.print(f"  backbone       denoiser {count(sizes['denoiser'])}, VAE {count(sizes['vae'])}")
    console.print(f"  text encoders  {encoders}")
    return 0


def show_policy_command(*, path, console) -> int:
    """What `jsbench policies show` does; the exit code."""
    import json

    from jsbench.policy.schedule_policy import load_policy

    _, manifest = load_policy(path)
    console.print_json(json.dumps(manifest))
    return 0

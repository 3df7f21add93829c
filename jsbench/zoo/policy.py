"""`policy:PATH` (and `global:PATH`): a trained policy's deterministic Dirichlet-mean schedule."""

from __future__ import annotations

from pathlib import Path

from jsbench.zoo.registry import ScheduleSource, ZooError, register_source

__all__ = ["method_label", "policy_source"]


def method_label(manifest: dict) -> str:
    """How a policy appears in a leaderboard: 'global', 'js', 'rloo', 'js (prompt-only)', ..."""
    if manifest.get("label"):
        return manifest["label"]
    if manifest.get("kind") == "global":
        return "global"
    if manifest.get("kind") == "indis":
        return "indis"  # no reward, no baseline: a teacher-matching loss
    if manifest.get("kind") == "tpdm":
        return f"tpdm ({manifest.get('baseline', 'policy')})"
    label = manifest.get("baseline", "policy")
    return label + " (prompt-only)" if manifest.get("kind") == "prompt" else label


def policy_source(policy, label: str = "policy", spec: str = "policy:<in memory>", checksum: str | None = None, manifest: dict | None = None,
                  backbone=None) -> ScheduleSource:
    """A policy object as a schedule source: its deterministic Dirichlet-mean schedule, [B, N+1] per batch
    (what `policy:PATH` evaluates once loaded; a policy still in memory, e.g. a trainer's, needs no file).
    `checksum` (the saved weights' sha256) keys the resumable side file; None for an unsaved policy.
    `backbone`: needed by a tpdm policy, whose schedule is read along the sampler's own latents (`make` runs
    the sampler step by step; the evaluation then samples along those sigmas again, the same bits: twice the
    sampler's cost, one code path for every source, see docs/peer-methods.md)."""

    def make(x, c):
        return policy.schedule_for(x, c, backbone)

    return ScheduleSource(spec=spec, label=label, steps=policy.config.steps, make=make, checksum=checksum, manifest=manifest)


@register_source("policy")
@register_source("global")
def _policy(spec: str, backbone, steps: int, suite=None, log=None) -> ScheduleSource:
    arg = spec.partition(":")[2]
    if not arg:
        raise ZooError(f"bad schedule {spec!r}: give a path, e.g. policy:policies/analytic/js-n5")
    from jsbench.policy.schedule_policy import load_policy

    seeds = sorted(p.parent.name for p in Path(arg).glob("seed*/manifest.json")) if not (Path(arg) / "manifest.json").exists() else []
    if seeds:
        raise ZooError(f"{arg} is a learned row of {len(seeds)} training seeds ({', '.join(seeds)}): evaluate one, e.g. "
                       f"policy:{Path(arg) / seeds[0]}, or all of them with `jsbench compare`")
    policy, manifest = load_policy(arg, backbone=backbone, steps=steps)  # float32, on the backbone's device
    return policy_source(policy, label=method_label(manifest), spec=spec, checksum=manifest.get("checksum"), manifest=manifest, backbone=backbone)

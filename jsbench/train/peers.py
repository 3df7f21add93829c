"""The training steps of the peer methods (docs/peer-methods.md), run by `jsbench.train.reinforce.Trainer`.

`--policy tpdm`: the rollout interleaves the policy's Beta draws with the backbone's Euler steps
(`tpdm_generate`); the update is the one-shot policy's REINFORCE update, its log-probability the sum of the
rollout's Beta log-probabilities (`tpdm_log_prob`), with the same baselines.

`--policy indis`: no reward and no baseline. One update (`indis_step`): B contexts (prompt, seed) as any
update draws them; the teacher's endpoint x_0 of each, the backbone's `ceiling_steps`-step default-schedule
Euler trajectory from the same x_T (no gradient); the student's endpoint along the policy's deterministic
schedule (its Dirichlet mean), the sampler back-propagated through (`euler_stepper` under grad); loss = the
mean over contexts of the mean squared difference of the two endpoints; AdamW and clipping as REINFORCE's.
Teacher endpoints are not cached: every update draws fresh noise seeds, so a (prompt, seed) never repeats
in a run. The log's `reward` is minus the loss (what the progress bar and the log readers show).
"""

from __future__ import annotations

import torch

from jsbench import JsbenchError
from jsbench.backbones.base import Condition

PEER_KINDS = ("tpdm", "indis")


class PeerRunError(JsbenchError):
    """A peer-method run that cannot run here, or an option that means nothing for it (exit 2, one line)."""


def check_peer_run(config, backbone, dist) -> None:
    """Refuse, with one line, a peer-method run that cannot run or whose options mean nothing for it."""
    kind = config.policy
    if kind not in PEER_KINDS:
        return
    if backbone.velocity is None or not callable(getattr(backbone, "euler_stepper", None)):
        raise PeerRunError(f"--policy {kind} steps the sampler itself and needs a flow velocity: backbone {backbone.name} has none "
                         f"(its clock is {backbone.clock_kind}); use --policy instance")
    if dist.distributed:
        raise PeerRunError(f"--policy {kind} runs in one process (no launcher yet)")
    if kind == "tpdm" and config.policy_arch == "xattn":
        raise PeerRunError("--policy tpdm reads the latent at every step with the small network: leave --policy-arch auto or small")
    if kind == "indis":
        from jsbench.train.config import TrainConfig

        for name, flag in (("baseline", "--baseline"), ("samples", "--samples")):
            if getattr(config, name) != getattr(TrainConfig, name):
                raise PeerRunError(f"{flag} means nothing for --policy indis: it has no reward and draws no schedules "
                                 f"(a teacher-matching loss back-propagated through the sampler)")


def tpdm_generate(trainer, ro):
    """The rollout's images, sigmas and trajectory (the latents each draw read, the ratios drawn), `batch` rows
    at a time, each chunk stepped through with the policy's draws interleaved."""
    from jsbench.backbones.base import train_batch_size

    rows = ro.rows
    cond = ro.cond.take(rows)
    x_T = ro.x_T[rows]
    batch = trainer.config.batch_size or train_batch_size(trainer.backbone) or x_T.shape[0]
    images, sigmas, states, ratios = [], [], [], []
    for lo in range(0, x_T.shape[0], batch):
        idx = torch.arange(lo, min(lo + batch, x_T.shape[0]))
        c = cond.take(idx)
        stepper = trainer.backbone.euler_stepper(c)
        x, sig, st, r = trainer.policy.rollout(stepper, x_T[idx.to(x_T.device)], c.pooled, sample=True)
        with torch.no_grad():
            images.append(stepper.images(x))
        sigmas.append(sig)
        states.append(st)
        ratios.append(r)
    ro.images = torch.cat([im.to(images[0].device) for im in images])
    ro.sigmas = torch.cat(sigmas)
    ro.trajectory = ([torch.cat([s[n] for s in states]) for n in range(len(states[0]))], torch.cat(ratios))
    return ro


def tpdm_log_prob(trainer, ro) -> torch.Tensor:
    """log pi [b, K] of the rollout's schedules, with gradient in the policy's parameters."""
    states, ratios = ro.trajectory
    pooled = ro.cond.pooled[ro.rows.to(ro.cond.pooled.device)]
    return trainer.policy.trajectory_log_prob(states, ro.sigmas, ratios, pooled).view(-1, trainer.config.samples)


def teacher_endpoints(backbone, x_T: torch.Tensor, cond: Condition) -> torch.Tensor:
    """The teacher's x_0: `ceiling_steps` Euler steps along the default schedule, in the sampler's state dtype."""
    with torch.no_grad():
        return backbone.euler_stepper(cond).run(x_T, backbone.default_sigmas(backbone.ceiling_steps, x_T))


def student_endpoints(policy, backbone, x_T: torch.Tensor, cond: Condition) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_0 along the policy's deterministic schedule, the schedule), differentiable in the policy's parameters."""
    with torch.enable_grad():
        sigmas = policy.differentiable_sigmas(x_T, cond.pooled, cond.tokens, cond.token_mask)
        return backbone.euler_stepper(cond).run(x_T, sigmas), sigmas


def indis_loss(policy, backbone, x_T: torch.Tensor, cond: Condition, teacher: torch.Tensor) -> torch.Tensor:
    """Mean over rows of the mean squared difference between the student's and the teacher's endpoints."""
    student, _ = student_endpoints(policy, backbone, x_T, cond)
    diff = (student - teacher.to(student.device, student.dtype)).flatten(1)
    return diff.square().mean(1).mean()


def indis_step(trainer, it: int) -> dict:
    """One INDIS-style update; the log record (reward = -loss)."""
    ro = trainer.prepare(it)
    teacher = teacher_endpoints(trainer.backbone, ro.x_T, ro.cond)
    loss = indis_loss(trainer.policy, trainer.backbone, ro.x_T, ro.cond, teacher)
    value = float(loss.detach())
    record = {"iteration": it, "reward": -value, "reward_std": 0.0, "objective": "teacher-mse"}
    if not torch.isfinite(loss):
        record.update(skipped="non-finite loss: update skipped")
        return record
    grad_norm = trainer.optimize(loss, record)
    if grad_norm is not None:
        record.update(loss=value, grad_norm=grad_norm)
    return record


def freeze_backbone(backbone) -> None:
    """No gradient into a backbone's own weights when the sampler is back-propagated through (indis)."""
    params = getattr(backbone, "net_parameters", None)
    if callable(params):
        for p in params():
            p.requires_grad_(False)


__all__ = ["PEER_KINDS", "PeerRunError", "check_peer_run", "tpdm_generate", "tpdm_log_prob", "teacher_endpoints", "student_endpoints", "indis_loss",
           "indis_step", "freeze_backbone", "JsbenchError"]

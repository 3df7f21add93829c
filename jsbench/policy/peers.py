"""Two other instance-level methods as schedule policies, beside the one-shot Dirichlet policy (docs/peer-methods.md).

`TPDMPolicy` (`--policy tpdm`), in the spirit of TPDM (Ye et al., "Schedule On the Fly: Diffusion Time Prediction
for Faster and Better Image Generation", arXiv 2412.01243); a re-implementation, not a claim of its numbers. At
each step n = 1..N-1 a small network reads the current latent x_{t_{n-1}}, the time t_{n-1} and the pooled prompt
embedding and gives a Beta(alpha_n, beta_n); r_n ~ Beta, t_n = r_n * t_{n-1}; the last step lands on t_N = 0. The
log-probability of a schedule is the sum of its N-1 Beta log-probabilities (`log_prob`). The schedule depends on
the intermediate latents, so sampling interleaves the policy's draws with the backbone's Euler steps
(`rollout`, over a backbone's `euler_stepper`). Differences from the paper: TPDM's time predictor reads the
diffusion transformer's own intermediate features and is trained with PPO against a reward model (with a
step-count penalty); here the network reads the latent itself, the step budget N is fixed, and it is trained
with the SAME REINFORCE estimator and leave-one-out baselines as the one-shot policy (jsbench/train/reinforce.py), so a
comparison isolates the policy's form. Untrained, each Beta's mean is the default schedule's ratio
t_n / t_{n-1} (concentration alpha + beta = c0): evaluation (the Beta means, deterministic) reproduces the default.

`--policy indis`, in the spirit of INDIS (Yuan et al., CVPR 2026; no public code): the one-shot instance
network (`DirichletSchedulePolicy`, kind "indis"), read deterministically (its Dirichlet mean), trained without
a reward by back-propagating a teacher-matching loss through the sampler (jsbench/train/peers.py). Its
network lives in jsbench/policy/schedule_policy.py; this module holds TPDM's (`TPDMNetwork`;
jsbench.policy.schedule_policy.TPDMPolicy is it saved and loaded like every policy).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from jsbench import JsbenchError
from jsbench.schedule import sigmas_from_increments

RATIO_EPS = 1e-4  # r_n is kept in [eps, 1 - eps]: every step moves, and no time reaches 0 before the last step
LOG_CONC_MIN, LOG_CONC_MAX = math.log(1e-1), math.log(1e5)


class PeerPolicyError(JsbenchError):
    pass


def time_features(t: torch.Tensor, width: int = 16) -> torch.Tensor:
    """[R] flow times -> [R, width] sinusoidal features of log t (times span decades near 0)."""
    freqs = torch.arange(width // 2, dtype=t.dtype, device=t.device)
    angle = torch.log(t.clamp_min(1e-6))[:, None] * (0.5 * 1.6 ** freqs)[None, :]
    return torch.cat([angle.sin(), angle.cos()], dim=-1)


class TPDMNetwork(nn.Module):
    """TPDM's network and calls; `jsbench.policy.schedule_policy.TPDMPolicy` adds the policies' persistence (this
    module imports nothing of schedule_policy.py, which builds it). Beta(alpha_n, beta_n) of the ratio r_n = t_n / t_{n-1} from (x_{t_{n-1}}, t_{n-1}, c), n = 1..N-1.

    Parametrised by the Beta's mean m = sigmoid(logit m0_n + a) and concentration k = c0 * exp(b), (a, b) from a
    zero-started head plus a per-step offset `step_bias` [N-1, 2] (the shared schedule, learned at --lr): untrained,
    m is the default schedule's ratio at every step."""

    def __init__(self, config):  # a jsbench.policy.schedule_policy.PolicyConfig of kind "tpdm"
        super().__init__()
        self.config = config
        n = config.steps
        default = sigmas_from_increments(torch.tensor(config.default_increments, dtype=torch.float64))
        ratios = (default[1:n] / default[: n - 1]).clamp(RATIO_EPS, 1 - RATIO_EPS)  # [N-1]
        self.register_buffer("logit_mean0", torch.logit(ratios).to(torch.float32))
        self.register_buffer("log_conc0", torch.tensor(math.log(config.concentration), dtype=torch.float32))
        w = config.width
        self.text = nn.Sequential(nn.Linear(config.pooled_dim, w), nn.SiLU())
        if len(config.latent_shape) == 1:
            self.latent = nn.Sequential(nn.Linear(config.latent_shape[0], w), nn.SiLU())
        else:
            from jsbench.policy.features import LatentFeatures

            self.latent = LatentFeatures(config.latent_shape, w)
        self.time = nn.Sequential(nn.Linear(16, w), nn.SiLU())
        layers: list[nn.Module] = []
        for _ in range(config.depth):
            layers += [nn.Linear(w, w), nn.SiLU()]
        self.trunk = nn.Sequential(*layers)
        self.head = nn.Linear(w, 2)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.step_bias = nn.Parameter(torch.zeros(max(n - 1, 0), 2))

    # ------------------------------------------------------------------------------------ one step

    def beta(self, x: torch.Tensor, t: torch.Tensor, pooled: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(alpha, beta) [R] of draw n (0-based: t_{n+1} = r * t_n) from the latent x [R, ...] at time t [R]."""
        dtype = self.head.weight.dtype
        h = self.text(pooled.to(dtype)) + self.latent(x.to(dtype)) + self.time(time_features(t.to(dtype)))
        a, b = (self.head(self.trunk(h)) + self.step_bias[n]).unbind(-1)
        mean = torch.sigmoid(self.logit_mean0[n] + a).clamp(RATIO_EPS, 1 - RATIO_EPS)
        conc = (self.log_conc0 + b).clamp(LOG_CONC_MIN, LOG_CONC_MAX).exp()
        return mean * conc, (1 - mean) * conc

    # ------------------------------------------------------------------------------------ a whole schedule

    @torch.no_grad()
    def rollout(self, stepper, x_T: torch.Tensor, pooled: torch.Tensor, sample: bool = True):
        """Run the sampler (`stepper`, a backbone's `euler_stepper` for these rows) step by step, drawing each
        next time from the policy (`sample`) or taking the Beta mean (evaluation). Returns (state at the end,
        sigmas [R, N+1] float32, states [the N-1 latents the draws read], ratios [R, N-1])."""
        n_steps = self.config.steps
        rows = x_T.shape[0]
        dev = self.log_conc0.device
        t = torch.ones(rows, dtype=torch.float32, device=dev)
        sigmas, states, ratios = [t], [], []
        x = stepper.start(x_T)
        for n in range(n_steps - 1):
            alpha, beta = self.beta(x.to(dev), t, pooled.to(dev), n)
            r = torch.distributions.Beta(alpha, beta).sample() if sample else alpha / (alpha + beta)
            r = r.clamp(RATIO_EPS, 1 - RATIO_EPS)
            t_next = r * t
            states.append(x)
            ratios.append(r)
            x = stepper.step(x, t, t_next)
            sigmas.append(t_next)
            t = t_next
        zero = torch.zeros_like(t)
        x = stepper.step(x, t, zero)
        sigmas.append(zero)
        ratio_t = torch.stack(ratios, 1) if ratios else torch.zeros(rows, 0, device=dev)
        return x, torch.stack(sigmas, 1), states, ratio_t

    def trajectory_log_prob(self, states: list[torch.Tensor], sigmas: torch.Tensor, ratios: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        """log pi of a rollout's schedule [R]: the sum over its N-1 draws of log Beta(r_n | alpha_n, beta_n), each
        read from the latent and time the draw saw (with gradient in the policy's parameters)."""
        total = torch.zeros(ratios.shape[0], dtype=torch.float32, device=ratios.device)
        for n, x in enumerate(states):
            alpha, beta = self.beta(x.to(ratios.device), sigmas[:, n].to(ratios.device), pooled.to(ratios.device), n)
            total = total + torch.distributions.Beta(alpha, beta).log_prob(ratios[:, n])
        return total

    def schedule_for(self, x_T: torch.Tensor, cond, backbone=None) -> torch.Tensor:
        """The deterministic evaluation schedule [B, N+1]: the Beta means, read along the latents they lead to
        (so the sampler runs once here; `policy:DIR` then samples along these sigmas again: the same bits)."""
        if backbone is None:
            raise PeerPolicyError("a tpdm policy's schedule depends on the intermediate latents: pass the backbone")
        return self.rollout(backbone.euler_stepper(cond), x_T, cond.pooled, sample=False)[1]

    # the one-shot calls make no sense for a step-by-step policy: refused, not silently wrong
    def log_alpha(self, *args, **kwargs):
        raise PeerPolicyError("a tpdm policy has no one-shot Dirichlet: use rollout / trajectory_log_prob")

    def mean_sigmas(self, *args, **kwargs):
        raise PeerPolicyError("a tpdm policy's schedule depends on the intermediate latents: use schedule_for(x_T, cond, backbone)")

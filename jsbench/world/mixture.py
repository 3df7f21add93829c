"""The closed-form flow of a Gaussian mixture: what the embedded backbone computes instead of a network.

Data given a prompt is a mixture of diagonal Gaussians, x_0 ~ sum_k pi_k N(mu_k, diag(s_k^2)). Under the
flow-matching path x_t = (1 - t) x_0 + t eps, the posterior mean E[x_0 | x_t] is exact and cheap, and the
Euler step of the probability-flow ODE written through it is

    x_{t'} = (1 - t') x0_hat + t' eps_hat,   eps_hat = (x_t - (1 - t) x0_hat) / t,

which at t' = 0 lands on x0_hat. Rows of a batch carry different prompts and different times.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PromptMixture:
    """One prompt's data distribution over latents: component means [K, D], log weights [K] and
    per-component, per-dimension standard deviations `spreads` [K, D] (a float broadcasts)."""

    means: torch.Tensor
    log_weights: torch.Tensor
    spreads: torch.Tensor | float

    def spread_tensor(self) -> torch.Tensor:
        return torch.as_tensor(self.spreads, dtype=self.means.dtype).expand_as(self.means)


class MixtureTable:
    """Many prompts' mixtures padded to one [P, Kmax, D] tensor so a batch of rows is one gather."""

    def __init__(self, mixtures: list[PromptMixture], dtype=torch.float32, device=None):
        if not mixtures:
            raise ValueError("MixtureTable needs at least one mixture")
        kmax = max(m.means.shape[0] for m in mixtures)
        dim = mixtures[0].means.shape[1]
        self.means = torch.zeros(len(mixtures), kmax, dim, dtype=dtype, device=device)
        self.log_weights = torch.full((len(mixtures), kmax), float("-inf"), dtype=dtype, device=device)
        # padded components get unit spread and -inf weight: they never take responsibility
        self.spreads = torch.ones(len(mixtures), kmax, dim, dtype=dtype, device=device)
        for i, m in enumerate(mixtures):
            k = m.means.shape[0]
            self.means[i, :k] = m.means.to(dtype)
            self.spreads[i, :k] = m.spread_tensor().to(dtype)
            self.log_weights[i, :k] = torch.log_softmax(m.log_weights.to(torch.float64), 0).to(dtype)

    def posterior_mean(self, x_t: torch.Tensor, t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """E[x_0 | x_t] for each row b of prompt index rows[b] at its own time t[b] (t in [0, 1])."""
        return self.gather(rows).posterior_mean(x_t, t)

    def gather(self, rows: torch.Tensor) -> "RowMixtures":
        """Each row's mixture [B, K, ...], gathered once for a sampler that asks for many posterior means."""
        return RowMixtures(means=self.means[rows], log_weights=self.log_weights[rows], spread2=self.spreads[rows].square(), keys=rows)

    def sample_data(self, rows: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Exact draws x_0 from each row's mixture (the reference distribution)."""
        probs = self.log_weights[rows].exp()
        comp = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        mu = self.means[rows, comp]
        noise = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=mu.device)
        return mu + self.spreads[rows, comp] * noise


@dataclass(frozen=True)
class RowMixtures:
    """The mixtures of a batch's rows: means [B, K, D], log weights [B, K], squared spreads [B, K, D], and
    optionally each row's mixture identity `keys` [B] (rows of equal key have the same mixture), which lets
    `shared_posterior_mean` compute neighbouring rows of the same mixture, state and time once."""

    means: torch.Tensor
    log_weights: torch.Tensor
    spread2: torch.Tensor
    keys: torch.Tensor | None = None

    @staticmethod
    def concat(parts: list["RowMixtures"], keys: torch.Tensor | None = None) -> "RowMixtures":
        """The rows of `parts` one after another (copies of the same values), with the given keys."""
        return RowMixtures(means=torch.cat([p.means for p in parts]), log_weights=torch.cat([p.log_weights for p in parts]),
                           spread2=torch.cat([p.spread2 for p in parts]), keys=keys)

    def shared_posterior_mean(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """`posterior_mean`, computing each run of neighbouring rows equal in key, state and time once.

        A training update samples K schedules from each context, so the sampler's first step starts K rows from
        the same noise at the same time under the same mixture. Every operation of `posterior_mean` acts on each
        row alone (elementwise, or reducing within the row), so a row's result is the same bits in a smaller
        batch (tests/test_world_fast_paths.py)."""
        first = self._run_starts(x_t, t)
        if first is None:
            return self.posterior_mean(x_t, t)
        shared = RowMixtures(self.means[first], self.log_weights[first], self.spread2[first])
        return shared.posterior_mean(x_t[first], t[first])[first.cumsum(0) - 1]

    def _run_starts(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor | None:
        """A mask of the rows that start a run of rows equal to their predecessor in key, state and time (bit
        for bit), or None when every row starts its own (nothing to share), autograd needs every row, the times
        are not one per row, or the rows are not on the CPU."""
        if (self.keys is None or x_t.shape[0] < 2 or x_t.dim() != 2 or t.shape != x_t.shape[:1] or x_t.device.type != "cpu"
                or torch.is_grad_enabled() and (x_t.requires_grad or t.requires_grad)):
            return None  # CPU only: that a smaller batch reduces each row in the same order is checked there
        bits_x, bits_t = _bits(x_t), _bits(t)
        same = (self.keys[1:] == self.keys[:-1]) & (bits_t[1:] == bits_t[:-1]) & (bits_x[1:] == bits_x[:-1]).all(1)
        if not bool(same.any()):
            return None
        return torch.cat([same.new_ones(1), ~same])

    def posterior_mean(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """E[x_0 | x_t] of each row under its own mixture, at its own time t[b].

        The [B, K, D] intermediates are large, so they are updated in place rather than allocated anew per
        operation (allocating and faulting in fresh pages cost more than the arithmetic); each value is the
        same IEEE operation on the same operands as in the formula, so the result is bit for bit the same."""
        means, log_w, spread2 = self.means, self.log_weights, self.spread2
        t = t[:, None, None]
        signal = 1.0 - t
        if torch.is_grad_enabled() and (x_t.requires_grad or t.requires_grad):
            return self._posterior_mean_autograd(x_t, t, signal)
        var_t = torch.mul(signal.square(), spread2).add_(t.square())  # per-dim variance of x_t within a component
        resid = torch.mul(signal, means)
        torch.sub(x_t[:, None, :], resid, out=resid)  # x_t - signal * means, [B, K, D]
        energy = resid.square().div_(var_t).add_(var_t.log())  # resid^2 / var_t + log var_t
        logits = log_w - 0.5 * energy.sum(-1)
        resp = torch.softmax(logits, dim=-1)  # component responsibilities
        x0_k = torch.mul(signal, spread2).div_(var_t)  # the within-component Wiener gain ...
        x0_k.mul_(resid).add_(means)  # ... makes each component's estimate, means + gain * resid
        return x0_k.mul_(resp[..., None]).sum(1)

    def _posterior_mean_autograd(self, x_t: torch.Tensor, t: torch.Tensor, signal: torch.Tensor) -> torch.Tensor:
        """`posterior_mean` written out of place, so autograd can differentiate it in x_t and t (a sampler
        back-propagated through, `--policy indis`): the same IEEE operations on the same operands in the same
        order, so the same bits (tests/test_peer_policies.py)."""
        means, log_w, spread2 = self.means, self.log_weights, self.spread2
        var_t = torch.mul(signal.square(), spread2) + t.square()
        resid = x_t[:, None, :] - torch.mul(signal, means)
        energy = resid.square() / var_t + var_t.log()
        logits = log_w - 0.5 * energy.sum(-1)
        resp = torch.softmax(logits, dim=-1)
        x0_k = torch.mul(signal, spread2) / var_t * resid + means
        return (x0_k * resp[..., None]).sum(1)


def _bits(values: torch.Tensor) -> torch.Tensor:
    """The values' bit patterns as integers of their width, so that equality is identity (-0.0 is not 0.0)."""
    width = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
    return values.contiguous().view(width[values.dtype]) if values.dtype in width else values


def euler_flow(table: MixtureTable, x_T: torch.Tensor, rows: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
    """Integrate every row along its own schedule sigmas[b] (1 -> 0) with Euler steps; returns x_0."""
    return euler_flow_rows(table.gather(rows), x_T, sigmas)  # the rows' mixtures are the same at every step


def euler_flow_rows(mixtures: "RowMixtures", x_T: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
    """`euler_flow` on rows whose mixtures are already gathered."""
    x = x_T
    for j in range(sigmas.shape[1] - 1):
        x = euler_update(mixtures, x, sigmas[:, j], sigmas[:, j + 1])
    return x


def euler_update(mixtures: RowMixtures, x: torch.Tensor, t: torch.Tensor, t_next: torch.Tensor) -> torch.Tensor:
    """One Euler step of `euler_flow` for every row, from its time t[b] to t_next[b]: the step a sampler that
    interleaves other work with its steps takes (`AnalyticBackbone.euler_stepper`), the same bits."""
    x0_hat = mixtures.shared_posterior_mean(x, t)  # a training update's K samples of a context start as one row
    eps_hat = (x - (1.0 - t)[:, None] * x0_hat) / t[:, None]
    return (1.0 - t_next)[:, None] * x0_hat + t_next[:, None] * eps_hat

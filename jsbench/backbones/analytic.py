"""`analytic`: the embedded closed-form world behind the Backbone protocol.

Its "network" is the exact posterior mean of each prompt's Gaussian mixture, its sampler the Euler
flow sampler every flow backbone uses, its decoder the scene renderer. Many-step sampling is its
ceiling (the analogue of a 50-step teacher); few-step sampling fails the way real samplers do.
Its clock is flow time: sigma = t, x_t = (1 - t) x_0 + t eps, the same clock as SD3/Flux, and its
default schedule is Flux's: the exponential time shift sigma' = e^mu sigma / (1 + (e^mu - 1) sigma)
at the base resolution, mu = 0.5 (Flux's `base_shift`; the world's images are far below Flux's
base sequence length, where the shift stops decreasing).
"""

from __future__ import annotations

import math

from typing import Sequence

import torch

from jsbench.backbones import register
from jsbench.backbones.base import DEFAULT_CEILING_STEPS, Condition, EulerStepper
from jsbench.devices import pick_device
from jsbench.schedule import check_sigmas, shifted_sigmas
from jsbench.world import EmbeddedWorld, token_features
from jsbench.world.mixture import euler_flow_rows, euler_update


ENCODING_CACHE_SIZE = 4096  # prompts whose encodings a backbone keeps (the worlds' own suites have a few hundred)


class AnalyticBackbone:
    name = "analytic"
    model_id = "jsbench/analytic-scenes"
    max_steps = 1000
    draws_embedded_world = True  # its prompts and images are the embedded world's; the world's suites score them
    draws_text = True  # the embedded text world draws quoted text (the ocr suite and reward score it)
    geneval_world = None  # the scene world's own GenEval prompts and exact detector
    default_steps = None  # no step count of its own: as a distilled row it runs at its section's budget
    ceiling_steps = DEFAULT_CEILING_STEPS
    decode_chunk = None  # the renderer draws a whole batch in one call
    eval_batch = None  # DEFAULT_EVAL_BATCH rows per evaluation call
    train_batch = None  # a training update samples all B*K rows in one call
    velocity_dtype = torch.float64  # the exact flow runs in float64 (`sample_latents`)
    clock_kind = "flow"  # sigma = t, x_t = (1 - t) x_0 + t eps
    ays_schedule = None  # diffusers' AysSchedules has no entry for the embedded world

    def __init__(self, device: str | None = None):
        self.device = pick_device(device, default="cpu")  # the embedded world runs on the CPU unless told
        self.dtype = torch.float32
        self.world = EmbeddedWorld()
        self._velocity_table = None  # `velocity`'s mixture table for the last prompt set it was called on
        self._velocity_rows = None  # (table, rows, their gathered mixtures) of `velocity`'s last call
        self._encodings: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}  # `_encoded`'s cache

    @property
    def pooled_dim(self) -> int:
        return self.world.pooled_dim

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return (self.world.latent_dim,)

    @property
    def token_dim(self) -> int:
        """Width of `Condition.tokens`: one row per word, in the pooled vector's coordinates."""
        return self.world.pooled_dim

    def encode(self, prompts: Sequence[str]) -> Condition:
        prompts = list(prompts)
        rows = [self._encoded(p) for p in prompts]
        pooled = torch.stack([pooled for pooled, _, _ in rows]).to(self.device, self.dtype)
        tokens = torch.stack([tokens for _, tokens, _ in rows]).to(self.device, self.dtype)
        mask = torch.stack([mask for _, _, mask in rows]).to(self.device)
        return Condition(prompts=prompts, pooled=pooled, tokens=tokens, token_mask=mask)

    def _encoded(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A prompt's (pooled [P], tokens [L, P], mask [L]) on the CPU, computed once per prompt: a training
        run encodes the same few hundred prompts every update. Callers stack them (a copy), never write them."""
        cached = self._encodings.get(prompt)
        if cached is None:
            self.world.validate(prompt)  # fail early, with the prompt named, before any sampling
            if len(self._encodings) >= ENCODING_CACHE_SIZE:  # the text world takes any quoted words: stay bounded
                self._encodings.clear()
            tokens, mask = token_features(prompt, self.world.embed)
            cached = self._encodings[prompt] = (self.world.embed(prompt), tokens, mask)
        return cached

    def initial_noise(self, seeds: Sequence[int]) -> torch.Tensor:
        rows = [torch.randn(self.world.latent_dim, generator=torch.Generator().manual_seed(int(s))) for s in seeds]
        return torch.stack(rows).to(self.device, self.dtype)

    default_mu = 0.5

    def default_sigmas(self, steps: int, x_T: torch.Tensor) -> torch.Tensor:
        """Flux's default: uniform flow-time steps under the time shift e^mu, mu = 0.5."""
        return shifted_sigmas(steps, math.exp(self.default_mu), batch=x_T.shape[0], dtype=self.dtype, device=self.device)

    def sample_latents(self, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor) -> torch.Tensor:
        check_sigmas(sigmas, free_start=True)  # x_T enters at sigma_0 (OSS free start)
        x_T, sigmas = x_T.to(self.device, torch.float64), sigmas.to(self.device, torch.float64)
        groups = self._mixture_groups(list(cond.prompts))
        if groups[0][0] is None:
            return euler_flow_rows(groups[0][1], x_T, sigmas).to(self.dtype)
        out = torch.empty(x_T.shape, dtype=torch.float64, device=self.device)
        for sel, mixtures in groups:
            out[sel] = euler_flow_rows(mixtures, x_T[sel], sigmas[sel])
        return out.to(self.dtype)

    def _mixture_groups(self, prompts: list[str]) -> list[tuple[torch.Tensor | None, object]]:
        """(row index or None for all rows, their gathered mixtures): the groups `sample_latents` and
        `euler_stepper` run the flow on (one here; the detail world's one per mixture size)."""
        table, rows = self.world.table(prompts, dtype=torch.float64, device=self.device)
        return [(None, table.gather(rows))]

    def euler_stepper(self, cond: Condition) -> EulerStepper:
        """`sample_latents`' loop one step at a time (float64 state, `euler_update`): the same bits."""
        groups = self._mixture_groups(list(cond.prompts))

        def step(x, sigma, sigma_next):
            t, t_next = sigma.to(self.device, torch.float64), sigma_next.to(self.device, torch.float64)
            if groups[0][0] is None:
                return euler_update(groups[0][1], x, t, t_next)
            out = torch.zeros_like(x)
            for sel, mixtures in groups:
                out = out.index_put((sel,), euler_update(mixtures, x[sel], t[sel], t_next[sel]))
            return out

        def latents(x):
            return x.to(self.dtype)

        return EulerStepper(start=lambda x_T: x_T.to(self.device, torch.float64), step=step, latents=latents,
                            images=lambda x: self.decode(latents(x), cond.prompts))

    @torch.no_grad()
    def velocity(self, x: torch.Tensor, sigma: torch.Tensor, cond: Condition) -> torch.Tensor:
        """The exact flow velocity (x - E[x_0 | x_t]) / t, float64, of each row under its prompt's mixture."""
        # one mixture table per distinct prompt set (building it is the slow part), rows gathered from it
        unique = tuple(dict.fromkeys(cond.prompts))
        cached = self._velocity_table
        if cached is None or cached[0] != (unique, x.device):
            table, rows_u = self.world.table(list(unique), dtype=torch.float64, device=x.device)
            cached = self._velocity_table = ((unique, x.device), table, dict(zip(unique, rows_u.tolist())))
        _, table, pos = cached
        rows = torch.tensor([pos[p] for p in cond.prompts], device=x.device)
        # the rows' mixtures, gathered again only when the rows change: OSS's searches call this chunk by chunk
        # on the same prompts (a copy of the table's rows, so the same values either way)
        gathered = self._velocity_rows
        if gathered is None or gathered[0] is not table or not torch.equal(gathered[1], rows):
            gathered = self._velocity_rows = (table, rows, table.gather(rows))
        x64, t = x.to(torch.float64), sigma.to(x.device, torch.float64)
        x0 = gathered[2].posterior_mean(x64, t)
        return (x64 - x0) / t.view(-1, *([1] * (x.dim() - 1)))

    def decode(self, latents: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        """Scenes render at 48x48, text scenes at 64x256 (a batch is one or the other)."""
        return self.world.render(latents, list(prompts))

    @torch.no_grad()
    def sample(self, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor) -> torch.Tensor:
        return self.decode(self.sample_latents(x_T, cond, sigmas), cond.prompts)


@register("analytic")
def _factory(model: str | None = None, device: str | None = None) -> AnalyticBackbone:
    return AnalyticBackbone(device=device)

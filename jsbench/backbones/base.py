"""The Backbone protocol: the few calls every sampler offers, embedded or real.

Nothing above this module knows which backbone it holds. A backbone:
- encodes prompts into a `Condition` (what its sampler needs + a pooled vector the policy reads),
- draws deterministic initial noise per seed,
- gives the pipeline's own default schedule (in flow time, sigma from 1 to 0),
- samples a batch in ONE call with a different schedule per row, and decodes to RGB images in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, runtime_checkable

import torch


@dataclass
class Condition:
    """Encoded prompts. `pooled` [B, P] and `tokens` [B, T, D] (the per-token embeddings, `token_mask` [B, T]
    True on real tokens) are what the policy reads; `tensors` hold what the sampler needs.

    Every tensor in `tensors` has the batch on dim 0, so a Condition can be indexed (`take`) to repeat
    or shard rows without knowing what the backbone put there.
    """

    prompts: list[str]
    pooled: torch.Tensor
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    tokens: torch.Tensor | None = None
    token_mask: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.prompts)

    def take(self, index: torch.Tensor | Sequence[int]) -> "Condition":
        # a tensor index stays where it is; a list becomes a CPU tensor (never the default device's)
        index = index.long() if isinstance(index, torch.Tensor) else torch.as_tensor(index, dtype=torch.long, device="cpu")
        idx = index.tolist()
        return Condition(
            prompts=[self.prompts[i] for i in idx],
            pooled=self.pooled[index.to(self.pooled.device)],
            tensors={k: v[index.to(v.device)] for k, v in self.tensors.items()},
            tokens=None if self.tokens is None else self.tokens[index.to(self.tokens.device)],
            token_mask=None if self.token_mask is None else self.token_mask[index.to(self.token_mask.device)],
        )

    def repeat_interleave(self, repeats: int) -> "Condition":
        """Each row `repeats` times in a row: [c0, c0, c1, c1, ...] (B contexts x K samples)."""
        return self.take(torch.arange(len(self)).repeat_interleave(repeats))


@dataclass
class EulerStepper:
    """A flow backbone's sampler loop one step at a time, for a sampler that decides its next time from the
    current latent (`--policy tpdm`) or is back-propagated through (`--policy indis`); `euler_stepper(cond)` on
    the backbones that have one (those with a flow `velocity`). `start(x_T)` is the loop's state, `step(x,
    sigma [R], sigma_next [R])` one Euler update of every row (the very operations of `sample_latents`, so
    stepping along fixed times gives its bits: tests/test_peer_policies.py), `latents(x)` what `sample_latents`
    returns and `images(x)` what `sample` returns. No `no_grad` inside: a caller under grad gets gradients in x
    and the sigmas."""

    start: Callable[[torch.Tensor], torch.Tensor]
    step: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    latents: Callable[[torch.Tensor], torch.Tensor]
    images: Callable[[torch.Tensor], torch.Tensor]

    def run(self, x_T: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
        """The loop's state after every row's steps along its fixed sigmas [R, N+1] (from `start(x_T)`)."""
        x = self.start(x_T)
        for j in range(sigmas.shape[1] - 1):
            x = self.step(x, sigmas[:, j], sigmas[:, j + 1])
        return x


@runtime_checkable
class Backbone(Protocol):
    name: str
    model_id: str
    device: torch.device
    dtype: torch.dtype
    max_steps: int
    """The largest step budget the backbone accepts (a policy or eval asking for more is refused)."""
    # What the rest of jsbench knows of a backbone beyond its calls. Every adapter sets each one as a class
    # attribute, so `backbone_class(name)` reads them without loading weights (see tests/test_backbone_protocol.py).
    default_steps: int | None
    """The pipeline's own default step count: a distilled sampler's row runs at it (None: no count of its own,
    the embedded worlds; such a sampler runs at the budget of the section it is filed under)."""
    ceiling_steps: int
    """Steps of the many-step reference, the `ceiling` schedule (DEFAULT_CEILING_STEPS where nothing cheaper converges)."""
    draws_embedded_world: bool
    """True on a backbone that draws the embedded scene world (analytic, detail, scenes-dit): the embedded-world
    suites then score it with the world's prompts and exact detector."""
    draws_text: bool
    """True on a backbone that can draw a prompt's quoted text (every text-to-image model; of the embedded worlds
    only analytic's text world): the ocr suite and reward refuse the others before sampling."""
    geneval_world: type | None
    """The world class whose prompts and detector the embedded GenEval suite uses (None: the scene world)."""
    decode_chunk: int | None
    """Images per decode (VAE) call in `sample` (None: the whole batch in one call, the world's renderer)."""
    eval_batch: int | None
    """Rows per sampler call in evaluation, the default `--batch-size` (None: DEFAULT_EVAL_BATCH)."""
    train_batch: int | None
    """Rows per sampler call in a training update (None: all B*K rows in one call)."""
    velocity: Callable[[torch.Tensor, torch.Tensor, Condition], torch.Tensor] | None
    """`velocity(x [R, *latent_shape], sigma [R], cond)` -> [R, *latent_shape] in `velocity_dtype`: the flow velocity
    dx/dsigma the backbone's sampler integrates at flow time sigma (guidance included, no gradient), row r with
    cond's row r. A method on the backbones whose clock is flow time (the embedded worlds: the exact posterior;
    SD3.5, Flux, scenes-dit: the transformer); None where the sampler integrates another clock (SD-XL). The
    schedule zoo's OSS needs it (`jsbench.zoo.oss.velocity_fn`)."""
    velocity_dtype: torch.dtype | None
    """The precision the sampler keeps its state in, in which `velocity` returns (float64 for the embedded
    worlds, float32 for the diffusers adapters, which upcast the state each step); None without a velocity."""
    clock_kind: str
    """What the schedule's sigma (the policy's clock) is: "flow", flow time as the model sees it (analytic,
    SD3.5, Flux); "discrete", a DDPM model on a VE-sigma scheduler with normalised flow time as its clock
    (SD-XL, see backbones/sdxl_clock.py), which then also offers the `DiscreteClock` calls."""
    ays_schedule: str | None
    """The key of the backbone family's Align Your Steps schedule in diffusers' `AysSchedules` (SD-XL:
    "StableDiffusionXLSigmas"; None: the family has none). Only a "discrete" backbone's can be run."""

    @property
    def pooled_dim(self) -> int: ...

    @property
    def latent_shape(self) -> tuple[int, ...]:
        """Shape of one row of x_T (without the batch dim)."""
        ...

    def encode(self, prompts: Sequence[str]) -> Condition: ...

    def initial_noise(self, seeds: Sequence[int]) -> torch.Tensor:
        """[B, *latent_shape], deterministic per seed, on the backbone's device and dtype."""
        ...

    def default_sigmas(self, steps: int, x_T: torch.Tensor) -> torch.Tensor:
        """[B, N+1] flow-time sigmas of the pipeline's own default schedule for this batch."""
        ...

    def sample(self, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor) -> torch.Tensor:
        """Images [B, 3, H, W] in [0, 1], one batched call, row b integrated along sigmas[b]."""
        ...


#: the clock kinds a backbone declares (`Backbone.clock_kind`)
CLOCK_KINDS = ("flow", "discrete")


@runtime_checkable
class DiscreteClock(Protocol):
    """What a backbone with `clock_kind == "discrete"` (SD-XL) offers beside the Backbone protocol: its scheduler's
    VE sigmas, on which the schedule zoo's formulas act (karras, exponential, beta, ays)."""

    table: torch.Tensor
    """The VE sigma of every DDPM training timestep [T], increasing (table[0]: the smallest trained level)."""

    def ve_start(self, steps: int) -> torch.Tensor:
        """The VE sigma the policy clock's 1 stands for at N steps (the pipeline's first noise level)."""
        ...

    def ve_sigmas(self, sigmas: torch.Tensor) -> torch.Tensor:
        """Policy clock [B, N+1] -> VE sigmas [B, N+1] (float32)."""
        ...

    def scheduler_sigma_range(self) -> tuple[float | None, float | None]:
        """(sigma_min, sigma_max) of the scheduler's config, which diffusers' family formulas prefer to the
        schedule's own range (None where the config leaves it unset)."""
        ...

    @property
    def timestep_spacing(self) -> str:
        """The scheduler's timestep spacing ("leading" for SD-XL base), named in refusals."""
        ...


#: every attribute and call of the Backbone protocol, what `load_backbone` checks a built backbone for
PROTOCOL_ATTRS = tuple(sorted(set(Backbone.__annotations__) | {k for k in vars(Backbone) if not k.startswith("_")}))


def missing_protocol_attrs(backbone) -> list[str]:
    """The Backbone protocol's attributes and calls `backbone` (an instance) lacks, in protocol order. Read off
    its class and its own fields, so a property is not run to find out whether it exists."""
    own = getattr(backbone, "__dict__", {})
    return [a for a in PROTOCOL_ATTRS if a not in own and not hasattr(type(backbone), a)]


# ---- memory: how many rows one sampler call takes, per backbone ------------------------------------------

#: rows per evaluation batch for a backbone whose `eval_batch` is None (the embedded world: cheap rows)
DEFAULT_EVAL_BATCH = 64  # as fast as 512 on the embedded world (4.0 s vs 4.3 s for 848 images), and the bar moves

#: steps of the `ceiling` schedule (the many-step reference) of a backbone with nothing cheaper that converges
DEFAULT_CEILING_STEPS = 200


def eval_batch_size(backbone) -> int:
    """The default `--batch-size` of `eval`/`compare`: the backbone's `eval_batch`, else DEFAULT_EVAL_BATCH."""
    return int(backbone.eval_batch or DEFAULT_EVAL_BATCH)


def train_batch_size(backbone) -> int | None:
    """Rows per sampler call in a training update: the backbone's `train_batch` (None: all B*K rows at once)."""
    size = backbone.train_batch
    return int(size) if size else None


def sample_rollout_rows(backbone, x_T: torch.Tensor, cond: Condition, rows: torch.Tensor, sigmas: torch.Tensor, batch: int | None) -> torch.Tensor:
    """The images of a training rollout's rows: row i starts from context rows[i]'s noise x_T[rows[i]] under its
    prompt (cond's row rows[i]) and follows sigmas[i]. What `sample_in_batches` returns for x_T[rows],
    cond.take(rows); a backbone class that can share work between the rows of one context (several schedules
    drawn for each, all starting from its noise) does so in its `sample_context_rows`, with the same result.
    Looked up on the class: a wrapper that forwards attributes (a spy, a proxy) is sampled through its own
    `sample`."""
    if getattr(type(backbone), "sample_context_rows", None) is not None:
        return backbone.sample_context_rows(x_T, cond, rows, sigmas, batch)
    return sample_in_batches(backbone, x_T[rows], cond.take(rows), sigmas, batch)


def sample_in_batches(backbone, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor, batch: int | None) -> torch.Tensor:
    """`backbone.sample` over `batch` rows at a time, images concatenated. Rows never interact in a sampler
    (each follows its own schedule from its own noise), so the result is that of one call over all rows;
    only the peak memory changes."""
    n = x_T.shape[0]
    if not batch or batch >= n:
        return backbone.sample(x_T, cond, sigmas)
    parts = []
    for start in range(0, n, batch):
        rows = torch.arange(start, min(start + batch, n), device=x_T.device)
        parts.append(backbone.sample(x_T[rows], cond.take(rows), sigmas[rows.to(sigmas.device)]))
    return torch.cat([p.to(parts[0].device) for p in parts], dim=0)

"""`detail`: the embedded world with content at prompt- and noise-dependent scales (a positive control).

The `analytic` backbone with `jsbench.world.detail.DetailWorld` in place of the scene world: the same
exact Gaussian-mixture flow, Euler sampler and scene renderer, plus a texture whose detail lives at a
scale s set by the prompt ("with hairline | fine | medium | broad stripes") or, for the open phrases
("with stripes", "with mixed stripes"), by the mixture mode the initial noise picks. The GenEval suite
scores it with the world's own prompts and a detector that counts an object only if its texture is
resolved. Few-step sampling resolves detail at s only with steps near t ~ s, so the best schedule
differs by prompt and, for the open phrases, by noise: where `analytic` is the honest null (one global
schedule is near-optimal), this world is where instance-level schedules must win.

Its default schedule is the time shift 1/3 (sigma' = sigma / (3 - 2 sigma)), which spends the few steps
at low noise, the schedule one would tune on the coarsest texture; the Flux default of `analytic`
resolves no texture at 3 steps, which would leave a policy that starts there no reward to learn from.
"""

from __future__ import annotations

import math

import torch

from jsbench.backbones import register
from jsbench.backbones.analytic import AnalyticBackbone
from jsbench.world.detail import DetailWorld
from jsbench.world.mixture import RowMixtures


class DetailBackbone(AnalyticBackbone):
    name = "detail"
    model_id = "jsbench/detail-scenes"
    default_mu = -math.log(3.0)  # shift e^mu = 1/3
    geneval_world = DetailWorld  # the GenEval suite takes this world's prompts and texture-checking detector
    draws_text = False  # scenes only: the ocr suite and reward refuse it

    def __init__(self, device: str | None = None):
        super().__init__(device=device)
        self.world = DetailWorld()

    def _mixture_groups(self, prompts: list[str]) -> list[tuple[torch.Tensor | None, object]]:
        """The analytic sampler's groups here: the rows of each mixture size (1 to 192 components), with their
        mixtures, so no row pays for another prompt's padding. A row's mixture is its prompt's, made once per
        prompt (`DetailWorld.row_mixture`) and copied: the values a table of the group's prompts would give."""
        mixtures = [self.world.row_mixture(p, torch.float64, self.device) for p in prompts]
        sizes = [m.means.shape[1] for m in mixtures]
        groups = []
        for size in sorted(set(sizes)):
            idx = [i for i, k in enumerate(sizes) if k == size]
            names = [prompts[i] for i in idx]
            keys = torch.tensor([names.index(n) for n in names], device=self.device)  # rows of one prompt share a key
            groups.append((torch.tensor(idx, device=self.device), RowMixtures.concat([mixtures[i] for i in idx], keys)))
        return groups


@register("detail")
def _factory(model: str | None = None, device: str | None = None) -> DetailBackbone:
    return DetailBackbone(device=device)

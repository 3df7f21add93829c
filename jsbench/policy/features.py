"""Feature encoders of the initial noise x_T for the schedule policy, for latents that are not vectors.

The policy (jsbench/policy/schedule_policy.py) reads x_T and the pooled text embedding and emits a whole schedule
in one forward pass. For the embedded world x_T is a short vector and an MLP suffices; a real backbone's x_T is
an image latent ([C, H, W]: SD-XL, SD3.5) or a sequence of packed patch tokens ([S, C]: Flux). This
module turns either into a [B, width] feature vector:

- image latents: a small conv net (stride-2 stages with one residual block each) and attention pooling
  (a learned query, optionally shifted by the pooled text embedding, attends over the final feature
  map with a 2-D sinusoidal position code), so the policy can see *where* the noise has low-frequency
  structure, not only its global statistics;
- packed tokens: a per-token MLP stack with a 1-D position code (Flux packs row-major), then the same
  attention pooling.
- vectors (the embedded world) get a plain MLP, so one class covers every backbone.

Why attention pooling rather than a mean: x_T is white noise, so its mean over positions carries almost
nothing; what a per-instance schedule can exploit is localised structure in that noise (a blob that
will become an object), which a learned query can pick out. Optional text-conditioned queries are the
"cross-attention" fusion with the prompt; the MLP that fuses features with the text embedding and the
zero-initialised head that keeps an untrained policy at the default schedule live in schedule_policy.py.

These encoders serve the `small` policy. The method's policy, whose noise features cross-attend to the
prompt's per-token embeddings (~20M parameters at full size, what `train` builds on the real backbones), is
`xattn.py`; `jsbench policies size` counts it. `full_size_config(latent_shape)` is a width/depth
of these encoders in that range (`policy_parameter_count` counts it); train never builds it.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

__all__ = [
    "LatentFeatures",
    "latent_kind",
    "full_size_config",
    "policy_parameter_count",
    "latent_features_flops",
]


def latent_kind(latent_shape: Sequence[int]) -> str:
    """"vector" [D], "tokens" [S, C] or "image" [C, H, W]."""
    n = len(tuple(latent_shape))
    if n == 1:
        return "vector"
    if n == 2:
        return "tokens"
    if n == 3:
        return "image"
    raise ValueError(f"latent shape {tuple(latent_shape)} is not [D], [S, C] or [C, H, W]")


def _groups(c: int) -> int:
    for g in (32, 16, 8, 4, 2, 1):
        if c % g == 0:
            return g
    return 1


class _ResBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.GroupNorm(_groups(c), c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1),
            nn.GroupNorm(_groups(c), c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1),
        )

    def forward(self, x):
        return x + self.net(x)


class _TokenBlock(nn.Module):
    def __init__(self, width: int, mlp_ratio: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp_ratio * width), nn.GELU(), nn.Linear(mlp_ratio * width, width))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


def _sincos(n: int, dim: int, device, dtype) -> torch.Tensor:
    """[n, dim] fixed sinusoidal code of positions 0..n-1 (dim even)."""
    pos = torch.arange(n, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim)
    ang = pos * freq[None]
    return torch.cat([ang.sin(), ang.cos()], dim=1).to(dtype)


def _sincos_2d(h: int, w: int, dim: int, device, dtype) -> torch.Tensor:
    """[h*w, dim]: half the channels code the row, half the column."""
    half = dim // 2
    rows = _sincos(h, half, device, dtype)[:, None, :].expand(h, w, half)
    cols = _sincos(w, dim - half, device, dtype)[None, :, :].expand(h, w, dim - half)
    return torch.cat([rows, cols], dim=-1).reshape(h * w, dim)


class _AttentionPool(nn.Module):
    """`queries` learned query tokens (optionally shifted by a text projection) attend over the features."""

    def __init__(self, width: int, heads: int, queries: int = 1, text_dim: int | None = None):
        super().__init__()
        self.query = nn.Parameter(torch.randn(queries, width) * width**-0.5)
        self.text = nn.Linear(text_dim, width) if text_dim else None
        self.norm = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.out = nn.Linear(queries * width, width)

    def forward(self, tokens: torch.Tensor, text: torch.Tensor | None = None) -> torch.Tensor:
        B = tokens.shape[0]
        q = self.query[None].expand(B, -1, -1)
        if self.text is not None and text is not None:
            q = q + self.text(text.to(q.dtype))[:, None, :]
        kv = self.norm(tokens)
        pooled, _ = self.attn(q, kv, kv, need_weights=False)
        return self.out(pooled.reshape(B, -1))


class LatentFeatures(nn.Module):
    """x_T [B, *latent_shape] -> features [B, width]; a plain nn.Module, float32 by default.

    Args:
        latent_shape: one row of x_T: [C, H, W] (image latent), [S, C] (packed tokens) or [D] (vector).
        width: feature width (and the widest conv channel count).
        depth: conv stages (each halves H and W) for images; token MLP blocks for tokens; MLP layers for vectors.
        heads: attention-pooling heads (must divide width).
        text_dim: if given, forward(x_T, pooled) conditions the pooling query on the pooled text embedding.
        mlp_ratio: hidden expansion of the token MLP blocks.
    """

    def __init__(
        self,
        latent_shape: Sequence[int],
        width: int = 256,
        depth: int | None = None,
        heads: int | None = None,
        text_dim: int | None = None,
        mlp_ratio: int = 4,
    ):
        super().__init__()
        self.latent_shape = tuple(int(s) for s in latent_shape)
        self.kind = latent_kind(self.latent_shape)
        self.width = int(width)
        heads = heads or max(1, min(8, self.width // 32))
        if self.width % heads:
            raise ValueError(f"width {self.width} must be divisible by heads {heads}")
        self.heads = heads
        if self.kind == "image":
            C, H, W = self.latent_shape
            max_depth = max(0, int(math.log2(max(1, min(H, W)))) - 2)  # stop at >= 4x4: norms need room
            self.depth = min(depth if depth is not None else 4, max_depth)
            c0 = max(8, self.width // 8)  # cheap at full resolution, wide only once downsampled
            chans = [min(self.width, c0 * 2**i) for i in range(self.depth + 1)]
            self.stem = nn.Conv2d(C, chans[0], 3, padding=1)
            stages = []
            for i in range(self.depth):
                stages += [nn.Conv2d(chans[i], chans[i + 1], 3, stride=2, padding=1), _ResBlock(chans[i + 1])]
            self.stages = nn.Sequential(*stages)
            self.to_width = nn.Conv2d(chans[-1], self.width, 1) if chans[-1] != self.width else nn.Identity()
            self.pool = _AttentionPool(self.width, heads, text_dim=text_dim)
        elif self.kind == "tokens":
            S, C = self.latent_shape
            self.depth = depth if depth is not None else 2
            self.embed = nn.Linear(C, self.width)
            self.blocks = nn.Sequential(*[_TokenBlock(self.width, mlp_ratio) for _ in range(self.depth)])
            self.pool = _AttentionPool(self.width, heads, text_dim=text_dim)
        else:
            (D,) = self.latent_shape
            self.depth = depth if depth is not None else 2
            layers: list[nn.Module] = [nn.Linear(D, self.width), nn.SiLU()]
            for _ in range(max(0, self.depth - 1)):
                layers += [nn.Linear(self.width, self.width), nn.SiLU()]
            self.mlp = nn.Sequential(*layers)
            self.text = nn.Linear(text_dim, self.width) if text_dim else None
        self.norm_out = nn.LayerNorm(self.width)

    def forward(self, x_T: torch.Tensor, pooled: torch.Tensor | None = None) -> torch.Tensor:
        if tuple(x_T.shape[1:]) != self.latent_shape:
            raise ValueError(f"x_T rows have shape {tuple(x_T.shape[1:])}, features built for {self.latent_shape}")
        dtype = self.norm_out.weight.dtype
        x = x_T.to(dtype)
        if self.kind == "image":
            h = self.to_width(self.stages(self.stem(x)))  # [B, width, h, w]
            B, Wd, hh, ww = h.shape
            tokens = h.flatten(2).transpose(1, 2) + _sincos_2d(hh, ww, Wd, h.device, h.dtype)[None]
            out = self.pool(tokens, pooled)
        elif self.kind == "tokens":
            t = self.embed(x)
            t = t + _sincos(t.shape[1], self.width, t.device, t.dtype)[None]
            out = self.pool(self.blocks(t), pooled)
        else:
            out = self.mlp(x)
            if self.text is not None and pooled is not None:
                out = out + self.text(pooled.to(dtype))
        return self.norm_out(out)


#: configurations near the paper's ~20M-parameter policy at full size, per latent kind
_FULL = {"image": {"width": 512, "depth": 4}, "tokens": {"width": 512, "depth": 8}, "vector": {"width": 1024, "depth": 4}}


def full_size_config(latent_shape: Sequence[int]) -> dict:
    """width/depth giving a ~20M-parameter policy for this latent (e.g. [4,128,128], [16,128,128], [4096,64])."""
    return dict(_FULL[latent_kind(latent_shape)])


def policy_parameter_count(
    width: int,
    depth: int | None = None,
    latent_shape: Sequence[int] = (16, 128, 128),
    pooled_dim: int = 768,
    steps: int = 28,
) -> dict[str, int]:
    """Parameters of LatentFeatures at this size plus an estimate of the policy's fusion MLP and head.

    The head is schedule_policy.py's; the estimate assumes the usual shape: a text projection pooled_dim -> width,
    a 2-layer MLP over [latent features, text features] (2*width -> 2*width -> width) and a linear head to
    `steps` log-concentrations. Returns {"latent_features", "fusion_and_head_estimate", "total"}.
    """
    with torch.device("meta"):
        feats = LatentFeatures(latent_shape, width=width, depth=depth)
    n_feat = sum(p.numel() for p in feats.parameters())
    w = width
    head = (pooled_dim * w + w) + (2 * w * 2 * w + 2 * w) + (2 * w * w + w) + (w * steps + steps)
    return {"latent_features": n_feat, "fusion_and_head_estimate": head, "total": n_feat + head}


def latent_features_flops(latent_shape: Sequence[int], width: int, depth: int | None = None, batch: int = 1) -> int:
    """Forward FLOPs of LatentFeatures (counted by torch's FlopCounterMode on meta tensors: no memory, no time)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        feats = LatentFeatures(latent_shape, width=width, depth=depth)
        x = torch.empty((batch, *latent_shape))
    with FlopCounterMode(display=False) as counter:
        feats(x)
    return int(counter.get_total_flops())

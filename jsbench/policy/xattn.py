"""The cross-attention policy network (`--policy-arch xattn`): noise features attend to the prompt's tokens.

The method's policy: a multi-scale encoder of x_T whose features, as queries, attend to the prompt's
per-token embeddings (T5 for Flux, CLIP+T5 for SD3.5, both CLIPs' hidden states for SD-XL, one row per
word on the embedded worlds), then an MLP to the N log-concentrations. The head is zero-initialised
(schedule_policy.py's `CrossAttentionSchedulePolicy`), so an untrained policy is the default schedule.

The encoder of x_T, by latent kind (`features.latent_kind`):

- image [C, H, W] (SD-XL, SD3.5): a conv stem and stride-2 stages with a residual block each; the last two
  scales become query tokens (2-D sinusoidal position code, a learned scale embedding);
- tokens [S, 4C] (Flux's packed 2x2 patches): unpacked to the latent image [C, 2h, 2w] they pack (a square
  grid of h = w = sqrt(S) patches, as Flux packs: `unpack_patch_tokens`), then the image encoder above, so
  a query sees 2-D neighbourhoods of the latent, not runs of consecutive tokens along a row;
- vector [D] (the embedded worlds): one query token per coordinate (its value times a learned vector,
  plus a learned position).

Text tokens are projected to the width, given a 1-D position code and a learned null token (always
attendable, so a row whose mask is empty still has a key). Each block is pre-norm cross-attention
(noise <- text), self-attention over the noise tokens and an MLP; the mean of the noise tokens plus the
pooled prompt's projection is the feature the policy's trunk reads.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from jsbench import JsbenchError
from jsbench.policy.features import _ResBlock, _sincos, _sincos_2d, latent_kind

#: the defaults of `--policy-arch xattn` when train is given no --width/--depth: (width, blocks) per latent kind
XATTN_DEFAULTS = {"image": (512, 3), "tokens": (512, 3), "vector": (128, 2)}
SCALES = 2  # encoder scales that become query tokens
MAX_STAGES = 4  # stride-2 stages at most


def xattn_defaults(latent_shape: Sequence[int]) -> tuple[int, int]:
    """(width, blocks) of the cross-attention policy for this latent: ~20M parameters on the real backbones."""
    return XATTN_DEFAULTS[latent_kind(latent_shape)]


class Attention(nn.Module):
    """Multi-head attention over keys/values `kv` (queries `q`), with an optional key mask [B, T]."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, width)

    def forward(self, q: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, Q, W = q.shape
        h = self.heads
        query = self.q(q).view(B, Q, h, W // h).transpose(1, 2)
        key, value = self.kv(kv).view(B, kv.shape[1], 2, h, W // h).permute(2, 0, 3, 1, 4)
        attn_mask = None if mask is None else mask[:, None, None, :]
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
        return self.out(out.transpose(1, 2).reshape(B, Q, W))


class CrossBlock(nn.Module):
    """noise <- text cross-attention, self-attention over the noise tokens, MLP; pre-norm residuals."""

    def __init__(self, width: int, heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.norm_cross, self.norm_text = nn.LayerNorm(width), nn.LayerNorm(width)
        self.cross = Attention(width, heads)
        self.norm_self = nn.LayerNorm(width)
        self.self_attn = Attention(width, heads)
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp_ratio * width), nn.GELU(), nn.Linear(mlp_ratio * width, width))

    def forward(self, x: torch.Tensor, text: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.cross(self.norm_cross(x), self.norm_text(text), mask)
        y = self.norm_self(x)
        x = x + self.self_attn(y, y)
        return x + self.mlp(self.norm_mlp(x))


def patch_grid(latent_shape: Sequence[int]) -> tuple[int, int, int]:
    """The latent image [C, 2h, 2w] that packed 2x2-patch tokens [S, 4C] hold: S = h * w on a square grid.
    Anything else is refused in one line: the grid's sides cannot be read off S alone."""
    S, C4 = (int(v) for v in latent_shape)
    side = math.isqrt(S)
    if side * side != S or C4 % 4:
        raise JsbenchError(f"the xattn policy reads packed 2x2-patch tokens [S, 4C] on their square grid; [{S}, {C4}] is not one "
                          "(a non-square Flux size): use --policy-arch small")
    return C4 // 4, 2 * side, 2 * side


def unpack_patch_tokens(tokens: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
    """[B, S, 4C] packed 2x2 patches (token (i, j) holds channel c of pixel (2i + a, 2j + b) at 4c + 2a + b,
    as Flux packs them, row-major) -> the latent image [B, C, 2h, 2w]."""
    C, H, W = grid
    B = tokens.shape[0]
    return tokens.reshape(B, H // 2, W // 2, C, 2, 2).permute(0, 3, 1, 4, 2, 5).reshape(B, C, H, W)


class NoiseEncoder(nn.Module):
    """x_T [B, *latent_shape] -> query tokens [B, Q, width] at several scales (see the module docstring)."""

    def __init__(self, latent_shape: Sequence[int], width: int):
        super().__init__()
        self.latent_shape = tuple(int(s) for s in latent_shape)
        self.kind = latent_kind(self.latent_shape)
        self.width = width
        cap = max(32, width // 2)  # the encoder's widest channel count; the projections lift it to `width`
        # packed patch tokens are read as the latent image they pack
        self.grid = patch_grid(self.latent_shape) if self.kind == "tokens" else None
        if self.kind in ("image", "tokens"):
            C, H, W = self.grid or self.latent_shape
            stages = min(MAX_STAGES, max(0, int(math.log2(max(1, min(H, W)))) - 2))  # stop at >= 4x4
            chans = [min(cap, 32 * 2**i) for i in range(stages + 1)]
            self.stem = nn.Conv2d(C, chans[0], 3, padding=1)
            self.stages = nn.ModuleList(
                nn.Sequential(nn.Conv2d(chans[i], chans[i + 1], 3, stride=2, padding=1), _ResBlock(chans[i + 1])) for i in range(stages)
            )
            used = chans[-SCALES:]
            self.proj = nn.ModuleList(nn.Conv2d(c, width, 1) for c in used)
        else:
            (D,) = self.latent_shape
            used = [width]
            self.value = nn.Parameter(torch.randn(width) / math.sqrt(width))
            self.position = nn.Parameter(torch.randn(D, width) / math.sqrt(width))
        self.scale = nn.Parameter(torch.zeros(len(used), width))

    def forward(self, x_T: torch.Tensor) -> torch.Tensor:
        if tuple(x_T.shape[1:]) != self.latent_shape:
            raise ValueError(f"x_T rows have shape {tuple(x_T.shape[1:])}, the policy was built for {self.latent_shape}")
        if self.kind == "vector":
            return x_T[:, :, None] * self.value + self.position + self.scale[0]
        if self.grid is not None:
            x_T = unpack_patch_tokens(x_T, self.grid)
        maps = []
        h = self.stem(x_T)
        maps.append(h)
        for stage in self.stages:
            h = stage(h)
            maps.append(h)
        out = []
        for i, (proj, m) in enumerate(zip(self.proj, maps[-len(self.proj):])):
            f = proj(m)
            B, W, hh, ww = f.shape
            out.append(f.flatten(2).transpose(1, 2) + _sincos_2d(hh, ww, W, f.device, f.dtype) + self.scale[i])
        return torch.cat(out, dim=1)


class CrossAttentionFeatures(nn.Module):
    """(x_T, pooled, tokens, token_mask) -> [B, width]: the noise's query tokens after `blocks` cross-attention
    blocks to the prompt's tokens, averaged, plus the pooled prompt's projection."""

    def __init__(self, latent_shape: Sequence[int], pooled_dim: int, token_dim: int, width: int, blocks: int):
        super().__init__()
        heads = max(1, min(8, width // 64))
        self.noise = NoiseEncoder(latent_shape, width)
        self.text_in = nn.Linear(token_dim, width)
        self.null = nn.Parameter(torch.zeros(1, 1, width))
        self.blocks = nn.ModuleList(CrossBlock(width, heads) for _ in range(blocks))
        self.norm = nn.LayerNorm(width)
        self.pooled = nn.Linear(pooled_dim, width)

    def forward(self, x_T, pooled, tokens, token_mask):
        B = x_T.shape[0]
        text = self.text_in(tokens)
        text = text + _sincos(text.shape[1], text.shape[2], text.device, text.dtype)
        text = torch.cat([self.null.expand(B, -1, -1), text], dim=1)
        mask = torch.cat([torch.ones(B, 1, dtype=torch.bool, device=token_mask.device), token_mask.bool()], dim=1)
        h = self.noise(x_T)
        for block in self.blocks:
            h = block(h, text, mask)
        return self.norm(h.mean(dim=1)) + self.pooled(pooled)

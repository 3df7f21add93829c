"""The cross-attention policy network (`--policy-arch xattn`): noise features attend to the prompt's tokens.

The method's policy: a multi-scale encoder of x_T whose features, as queries, attend to the prompt's
per-token embeddings (T5 for Flux, CLIP+T5 for SD3.5, both CLIPs' hidden states for SD-XL, one row per
word on the embedded worlds), then an MLP to the N log-concentrations. The head is zero-initialised
(policy.py's `CrossAttentionSchedulePolicy`), so an untrained policy is the default schedule.

The encoder of x_T, by latent kind (`policy_features.latent_kind`):

- image [C, H, W] (SD-XL, SD3.5): a conv stem and stride-2 stages with a residual block each; the last two
  scales become query tokens (2-D sinusoidal position code, a learned scale embedding);
- tokens [S, C] (Flux's packed 2x2 patches): a token encoder, each stage merging 4 neighbouring tokens
  (Flux packs row-major) into one wider token and an MLP block; the last two scales become queries;
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

from jsbench.policy_features import _ResBlock, _sincos, _sincos_2d, latent_kind

#: the defaults of `--policy-arch xattn` when train is given no --width/--depth: (width, blocks) per latent kind
XATTN_DEFAULTS = {"image": (512, 3), "tokens": (512, 3), "vector": (128, 2)}
SCALES = 2  # encoder scales that become query tokens
MAX_STAGES = 4  # stride-2 (image) or 4-merge (tokens) stages at most


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


class _MergeStage(nn.Module):
    """4 neighbouring tokens -> one token (a linear map of their concatenation), then an MLP block."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.merge = nn.Linear(4 * c_in, c_out)
        self.norm = nn.LayerNorm(c_out)
        self.mlp = nn.Sequential(nn.Linear(c_out, 2 * c_out), nn.GELU(), nn.Linear(2 * c_out, c_out))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        B, S, C = t.shape
        if S % 4:
            t = F.pad(t, (0, 0, 0, 4 - S % 4))
        t = self.merge(t.reshape(B, -1, 4 * C))
        return t + self.mlp(self.norm(t))


class NoiseEncoder(nn.Module):
    """x_T [B, *latent_shape] -> query tokens [B, Q, width] at several scales (see the module docstring)."""

    def __init__(self, latent_shape: Sequence[int], width: int):
        super().__init__()
        self.latent_shape = tuple(int(s) for s in latent_shape)
        self.kind = latent_kind(self.latent_shape)
        self.width = width
        cap = max(32, width // 2)  # the encoder's widest channel count; the projections lift it to `width`
        if self.kind == "image":
            C, H, W = self.latent_shape
            stages = min(MAX_STAGES, max(0, int(math.log2(max(1, min(H, W)))) - 2))  # stop at >= 4x4
            chans = [min(cap, 32 * 2**i) for i in range(stages + 1)]
            self.stem = nn.Conv2d(C, chans[0], 3, padding=1)
            self.stages = nn.ModuleList(
                nn.Sequential(nn.Conv2d(chans[i], chans[i + 1], 3, stride=2, padding=1), _ResBlock(chans[i + 1])) for i in range(stages)
            )
            used = chans[-SCALES:]
            self.proj = nn.ModuleList(nn.Conv2d(c, width, 1) for c in used)
        elif self.kind == "tokens":
            S, C = self.latent_shape
            stages = 0
            while stages < MAX_STAGES and math.ceil(S / 4 ** (stages + 1)) >= 4:
                stages += 1
            chans = [min(cap, 64 * 2**i) for i in range(stages + 1)]
            self.embed = nn.Linear(C, chans[0])
            self.stages = nn.ModuleList(_MergeStage(chans[i], chans[i + 1]) for i in range(stages))
            used = chans[-SCALES:]
            self.proj = nn.ModuleList(nn.Linear(c, width) for c in used)
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
        maps = []
        if self.kind == "image":
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
        t = self.embed(x_T)
        t = t + _sincos(t.shape[1], t.shape[2], t.device, t.dtype)
        maps.append(t)
        for stage in self.stages:
            t = stage(t)
            maps.append(t)
        out = []
        for i, (proj, m) in enumerate(zip(self.proj, maps[-len(self.proj):])):
            f = proj(m)
            out.append(f + _sincos(f.shape[1], self.width, f.device, f.dtype) + self.scale[i])
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

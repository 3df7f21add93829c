"""`flux-dev` and `flux-schnell`: FLUX.1 behind the Backbone protocol, on diffusers' FluxPipeline parts.

Clock: the policy speaks flow time, the sigma the transformer is evaluated at (it receives t = sigma and
scales it by 1000 inside). Flux-Dev's default schedule is the uniform grid linspace(1, 1/N, N) pushed
through the resolution-dependent shift t -> e^mu / (e^mu + 1/t - 1), mu = calculate_shift(image tokens);
`default_sigmas` returns that shifted schedule, and `sample` runs whatever sigmas it is given unshifted.
Schnell's scheduler has no shift, so its default is the plain uniform grid (4 steps).

Guidance: Flux-Dev is guidance-distilled: the guidance scale (3.5, the pipeline's default) enters as an
embedding, one forward per step, no CFG batch. Schnell has no guidance input at all.

Latents are the pipeline's packed layout: [S, 4C] tokens (2x2 latent patches), S = (H/16)(W/16).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from jsbench.backbones import register
from jsbench.backbones._diffusers import BackboneLoadError, FlowMatchBackbone
from jsbench.backbones.base import Condition

__all__ = ["FluxBackbone", "FluxDevBackbone", "FluxSchnellBackbone"]


class FluxBackbone(FlowMatchBackbone):
    pipeline_class_name = "FluxPipeline"
    default_image_size = 1024  # px, square: FLUX.1's default image (the pipeline's default_sample_size 128 x VAE factor 8)
    max_sequence_length = 512
    # memory (docs/real-backbones.md): ~34 GB of bf16 weights (12B transformer, T5-XXL); 8 rows of 4608
    # tokens per sampler call, 4 images of 1024^2 per VAE call (~1.4-1.6 GiB each in bf16)
    train_batch = 8
    eval_batch = 8
    decode_chunk = 4

    #: whether this variant's transformer has a guidance embedding (FLUX.1-dev yes, FLUX.1-schnell no)
    guidance_embeds: bool = True

    def _default_resolution(self) -> tuple[int, int]:
        side = int(getattr(self.pipe, "default_sample_size", 128)) * self.vae_scale_factor
        return side, side

    def _check_variant(self) -> None:
        """FLUX.1-dev and -schnell share one architecture but for the guidance embedding: weights of the other
        variant would run silently with the wrong guidance (Dev's at 0, Schnell's ignoring it)."""
        has = bool(self.pipe.transformer.config.guidance_embeds)
        if has != self.guidance_embeds:
            other = "flux-dev" if has else "flux-schnell"
            what = "has a guidance embedding" if has else "has no guidance embedding"
            raise BackboneLoadError(f"{self.name}: the transformer of {self.model_id} {what}: these are {other} weights; use --backbone {other}")

    def takes_guidance(self) -> bool:
        return bool(self.pipe.transformer.config.guidance_embeds)

    @property
    def pooled_dim(self) -> int:
        return int(self.pipe.text_encoder.config.hidden_size)  # CLIP's pooled output

    @property
    def token_dim(self) -> int:
        return int(self.pipe.transformer.config.joint_attention_dim)  # T5's width

    @property
    def latent_channels(self) -> int:
        return int(self.pipe.transformer.config.in_channels) // 4

    def _noise_shape(self) -> tuple[int, int, int]:
        # the pipeline's prepare_latents: sizes rounded to whole 2x2 patches
        f = self.vae_scale_factor * 2
        return (self.latent_channels, 2 * (self.height // f), 2 * (self.width // f))

    def _to_layout(self, latents: torch.Tensor) -> torch.Tensor:
        b, c, h, w = latents.shape
        return self.pipe._pack_latents(latents, b, c, h, w)

    def _image_seq_len(self, x_T: torch.Tensor | None = None) -> int:
        _, h, w = self._noise_shape()
        return (h // 2) * (w // 2)

    def _set_default_timesteps(self, scheduler, steps: int, mu: float | None) -> None:
        # FluxPipeline.__call__: sigmas = linspace(1, 1/N, N) handed to the scheduler, which shifts them
        sigmas = np.linspace(1.0, 1 / steps, steps)
        if scheduler.config.get("use_flow_sigmas", False):
            scheduler.set_timesteps(steps, mu=mu)
        else:
            scheduler.set_timesteps(sigmas=sigmas, mu=mu)

    @torch.no_grad()
    def _encode_prompts(self, prompts: Sequence[str]) -> Condition:
        """CLIP pooled + T5 sequence through the pipeline's own `encode_prompt`; the policy reads CLIP's pooled."""
        prompts = list(prompts)
        prompt_embeds, pooled, _text_ids = self.pipe.encode_prompt(
            prompt=prompts, prompt_2=None, device=self.device, num_images_per_prompt=1,
            max_sequence_length=self.max_sequence_length,
        )
        return Condition(
            prompts=prompts,
            pooled=pooled.detach().float(),
            tensors={"prompt_embeds": prompt_embeds, "pooled_prompt_embeds": pooled},
            tokens=prompt_embeds.detach(),  # T5's sequence
            token_mask=self._token_mask(self.pipe.tokenizer_2, prompts, prompt_embeds.shape[1]),
        )

    def _prepare(self, x: torch.Tensor, cond: Condition) -> dict:
        """Rotary position ids (text: zeros; image: the 2x2-patch grid) and the guidance embedding input."""
        pe = cond.tensors["prompt_embeds"]
        te = self.pipe.text_encoder
        text_ids = torch.zeros(pe.shape[1], 3, device=self.device, dtype=te.dtype if te is not None else self.dtype)
        _, h, w = self._noise_shape()
        img_ids = self.pipe._prepare_latent_image_ids(x.shape[0], h // 2, w // 2, self.device, pe.dtype)
        guidance = None
        if self.pipe.transformer.config.guidance_embeds:
            guidance = torch.full([1], self.guidance_scale, device=self.device, dtype=torch.float32).expand(x.shape[0])
        return {"txt_ids": text_ids, "img_ids": img_ids, "guidance": guidance}

    def _velocity(self, x: torch.Tensor, sigma_t: torch.Tensor, cond: Condition, ctx: dict) -> torch.Tensor:
        # the pipeline's timestep: scheduler.timesteps = sigmas * 1000, cast to the latents' dtype, / 1000
        timestep = (sigma_t * 1000).to(x.dtype) / 1000
        return self.pipe.transformer(
            hidden_states=x,
            timestep=timestep,
            guidance=ctx["guidance"],
            pooled_projections=cond.tensors["pooled_prompt_embeds"],
            encoder_hidden_states=cond.tensors["prompt_embeds"],
            txt_ids=ctx["txt_ids"],
            img_ids=ctx["img_ids"],
            joint_attention_kwargs={},
            return_dict=False,
        )[0]

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        vae = self.pipe.vae
        lat = self.pipe._unpack_latents(latents, self.height, self.width, self.vae_scale_factor)
        lat = (lat / vae.config.scaling_factor) + vae.config.shift_factor
        image = vae.decode(lat, return_dict=False)[0]
        return self._postprocess(image)

    # ---- tiny pipeline (tests) ----------------------------------------------------------------------
    #: whether the tiny transformer takes a guidance embedding (Flux-Dev's guidance distillation)
    tiny_guidance_embeds: bool = False

    @classmethod
    def tiny_scheduler(cls, mu_tokens: int | None = None):
        """The tiny pipeline's scheduler: the real model's scheduler config."""
        raise NotImplementedError

    @classmethod
    def tiny_pipeline(cls, *, max_latent_side: int = 32, mu_tokens: int | None = None):
        """A random-weight FluxPipeline (CLIP and T5) with the real model's scheduler config, a few thousand
        parameters wide; draws from torch's global generator (build it through
        `jsbench.backbones.tiny.build_tiny_pipeline(name, seed)`). `mu_tokens`: see `tiny_scheduler`."""
        import diffusers
        from transformers import CLIPTextModel

        from jsbench.backbones.tiny import clip_config, t5_encoder, tiny_clip_tokenizer, tiny_t5_tokenizer, tiny_vae

        transformer = diffusers.FluxTransformer2DModel(
            patch_size=1,
            in_channels=16,  # 4 latent channels packed 2x2
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=32,
            pooled_projection_dim=32,
            guidance_embeds=cls.tiny_guidance_embeds,
            axes_dims_rope=(4, 6, 6),
        )
        return diffusers.FluxPipeline(
            scheduler=cls.tiny_scheduler(mu_tokens),
            vae=tiny_vae(4, 0.1159, 0.3611),
            text_encoder=CLIPTextModel(clip_config(projection=32)),
            tokenizer=tiny_clip_tokenizer(),
            text_encoder_2=t5_encoder(32),
            tokenizer_2=tiny_t5_tokenizer(),
            transformer=transformer,
        )


class FluxDevBackbone(FluxBackbone):
    """FLUX.1-dev: 28 steps and guidance 3.5 (the pipeline's defaults), T5 length 512."""

    name = "flux-dev"
    default_model_id = "black-forest-labs/FLUX.1-dev"
    default_steps = 28
    default_guidance = 3.5
    max_sequence_length = 512
    tiny_guidance_embeds = True
    tiny_sampling = {"height": 32, "width": 32, "max_sequence_length": 64}
    full_size = {  # FLUX.1-dev transformer/config.json (diffusers' FluxTransformer2DModel defaults)
        "network": "FluxTransformer2DModel", "config": dict(guidance_embeds=True),
        "latent_channels": 16, "clip_len": 0, "text_dim": 4096, "pooled": 768, "cfg_batch": 1,
        "text_encoders": {"text_encoder": "clip-l", "text_encoder_2": "t5-xxl"}, "vae": "flux",
    }

    @classmethod
    def tiny_scheduler(cls, mu_tokens: int | None = None):
        """FLUX.1-dev's scheduler config: resolution-dependent (dynamic) shift. `mu_tokens`: reach the full
        mu = max_shift = 1.15 (as at 1024^2, 4096 tokens) already at this many image tokens, by scaling the
        token range [256, 4096] by mu_tokens / 4096 (tests run the 1024^2 schedule on 64 tokens)."""
        from diffusers import FlowMatchEulerDiscreteScheduler

        scale = 1.0 if mu_tokens is None else mu_tokens / 4096
        return FlowMatchEulerDiscreteScheduler(
            num_train_timesteps=1000,
            shift=3.0,
            use_dynamic_shifting=True,
            base_shift=0.5,
            max_shift=1.15,
            base_image_seq_len=max(1, round(256 * scale)),
            max_image_seq_len=max(2, round(4096 * scale)),
        )


class FluxSchnellBackbone(FluxBackbone):
    """FLUX.1-schnell, the timestep-distilled sampler: 4 steps, no guidance, T5 length 256 (model card)."""

    name = "flux-schnell"
    default_model_id = "black-forest-labs/FLUX.1-schnell"
    default_steps = 4
    default_guidance = 0.0
    guidance_embeds = False
    max_sequence_length = 256
    timestep_distilled = True
    tiny_sampling = {"height": 32, "width": 32, "max_sequence_length": 64}
    full_size = {  # FLUX.1-schnell transformer/config.json: Flux-Dev's without the guidance embedding
        "network": "FluxTransformer2DModel", "config": dict(guidance_embeds=False),
        "latent_channels": 16, "clip_len": 0, "text_dim": 4096, "pooled": 768, "cfg_batch": 1,
        "text_encoders": {"text_encoder": "clip-l", "text_encoder_2": "t5-xxl"}, "vae": "flux",
    }

    @classmethod
    def tiny_scheduler(cls, mu_tokens: int | None = None):
        """FLUX.1-schnell's scheduler config: no shift at all (`mu_tokens` does not apply)."""
        from diffusers import FlowMatchEulerDiscreteScheduler

        return FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=False)


@register("flux-dev")
def _flux_dev(model: str | None = None, device: str | None = None, **options) -> FluxDevBackbone:
    return FluxDevBackbone(model=model, device=device, **options)


@register("flux-schnell")
def _flux_schnell(model: str | None = None, device: str | None = None, **options) -> FluxSchnellBackbone:
    return FluxSchnellBackbone(model=model, device=device, **options)

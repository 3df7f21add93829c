"""`sd35` (SD3.5 Medium, the default), `sd35-medium`, `sd35-large`: StableDiffusion3Pipeline's parts.

Clock: the policy speaks flow time, the sigma the MMDiT is evaluated at (timestep = 1000 * sigma).
SD3.5's scheduler applies a static shift of 3 to its grid; `default_sigmas` returns the schedule *after*
that shift, exactly as the pipeline builds it (note it is not shift(linspace(1, 1/N, N)): the pipeline
spaces timesteps between the scheduler's already-shifted sigma_max and sigma_min, then shifts again),
and `sample` runs the sigmas it is given without shifting them.

Guidance: classifier-free guidance at the pipeline's default scale 7.0 with the pipeline's default
negative prompt (none given -> the empty string ""), batched as [uncond; cond] like the pipeline.
The policy reads the pooled text embedding: both CLIP pooled outputs concatenated ([B, 2048]).
"""

from __future__ import annotations

from typing import Sequence

import torch

from jsbench.backbones import register
from jsbench.backbones._diffusers import BackboneLoadError, FlowMatchBackbone
from jsbench.backbones.base import Condition
from jsbench.schedule import ScheduleError

__all__ = ["SD35Backbone", "SD35LargeBackbone"]


class SD35Backbone(FlowMatchBackbone):
    name = "sd35"
    default_model_id = "stabilityai/stable-diffusion-3.5-medium"
    default_image_size = 1024  # px, square: the real model's default image (its MMDiT's sample_size 128 x VAE factor 8)
    pipeline_class_name = "StableDiffusion3Pipeline"
    default_steps = 28
    default_guidance = 7.0
    max_sequence_length = 256
    _default_max_shift = 1.16  # SD3's fallback in calculate_shift (Flux's is 1.15)
    tiny_sampling = {"height": 32, "width": 32, "max_sequence_length": 64}
    full_size = {  # SD3.5 Medium (MMDiT-X) transformer/config.json
        "network": "SD3Transformer2DModel",
        "config": dict(
            sample_size=128, patch_size=2, in_channels=16, out_channels=16, num_layers=24, attention_head_dim=64,
            num_attention_heads=24, joint_attention_dim=4096, caption_projection_dim=1536, pooled_projection_dim=2048,
            pos_embed_max_size=384, qk_norm="rms_norm", dual_attention_layers=tuple(range(13)),
        ),
        "latent_channels": 16, "clip_len": 77, "text_dim": 4096, "pooled": 2048, "cfg_batch": 2,
        "text_encoders": {"text_encoder": "clip-l-proj", "text_encoder_2": "clip-g", "text_encoder_3": "t5-xxl"}, "vae": "sd3",
    }
    # memory (docs/real-backbones.md): Medium ~16 GB of bf16 weights with T5-XXL; CFG runs every row twice
    train_batch = 16
    eval_batch = 16
    decode_chunk = 4

    def _default_resolution(self) -> tuple[int, int]:
        side = int(self.pipe.transformer.config.sample_size) * self.vae_scale_factor
        return side, side

    @property
    def pooled_dim(self) -> int:
        return int(self.pipe.text_encoder.config.projection_dim + self.pipe.text_encoder_2.config.projection_dim)

    @property
    def token_dim(self) -> int:
        return int(self.pipe.transformer.config.joint_attention_dim)

    @property
    def latent_channels(self) -> int:
        return int(self.pipe.transformer.config.in_channels)

    def _image_seq_len(self, x_T: torch.Tensor | None = None) -> int:
        _, h, w = self._noise_shape()
        p = self.pipe.transformer.config.patch_size
        return (h // p) * (w // p)

    def _set_default_timesteps(self, scheduler, steps: int, mu: float | None) -> None:
        if scheduler.config.get("use_dynamic_shifting", False):
            scheduler.set_timesteps(steps, mu=mu)
        else:
            scheduler.set_timesteps(steps)

    @property
    def do_cfg(self) -> bool:
        return self.guidance_scale > 1

    def _check_variant(self) -> None:
        """SD3.5 Medium is an MMDiT-X (dual-attention layers), Large a 38-layer MMDiT without them: weights of
        the other one are refused (its batch sizes and the name in every record would be wrong)."""
        cfg = self.pipe.transformer.config
        dual = bool(cfg.get("dual_attention_layers") or ())
        large_depth = SD35LargeBackbone.full_size["config"]["num_layers"]
        if self.name == "sd35-large" and dual:
            raise BackboneLoadError(f"sd35-large: the transformer of {self.model_id} has dual-attention layers: these are SD3.5 Medium weights; use --backbone sd35-medium")
        if self.name != "sd35-large" and not dual and cfg.get("num_layers") == large_depth:
            raise BackboneLoadError(f"{self.name}: the transformer of {self.model_id} is a {large_depth}-layer MMDiT: these are SD3.5 Large weights; use --backbone sd35-large")

    @torch.no_grad()
    def _encode_prompts(self, prompts: Sequence[str]) -> Condition:
        prompts = list(prompts)
        pe, npe, pooled, npooled = self.pipe.encode_prompt(
            prompt=prompts, prompt_2=None, prompt_3=None, device=self.device, num_images_per_prompt=1,
            do_classifier_free_guidance=self.do_cfg, max_sequence_length=self.max_sequence_length,
        )
        tensors = {"prompt_embeds": pe, "pooled_prompt_embeds": pooled}
        if self.do_cfg:
            tensors.update(negative_prompt_embeds=npe, negative_pooled_prompt_embeds=npooled)
        # the policy reads the joint sequence: CLIP-L+G hidden states (77 tokens), then T5's (zeros without a T5)
        clip_len = int(self.pipe.tokenizer_max_length)
        mask = torch.cat([self._token_mask(self.pipe.tokenizer, prompts, clip_len),
                          self._token_mask(self.pipe.tokenizer_3 if self.pipe.text_encoder_3 is not None else None, prompts, pe.shape[1] - clip_len)], dim=1)
        return Condition(prompts=prompts, pooled=pooled.detach().float(), tensors=tensors, tokens=pe.detach(), token_mask=mask)

    def _prepare(self, x: torch.Tensor, cond: Condition) -> dict:
        t = cond.tensors
        if self.do_cfg:
            if "negative_prompt_embeds" not in t:
                raise ScheduleError(f"{self.name}: guidance {self.guidance_scale} needs a condition encoded with guidance on")
            return {
                "embeds": torch.cat([t["negative_prompt_embeds"], t["prompt_embeds"]], dim=0),
                "pooled": torch.cat([t["negative_pooled_prompt_embeds"], t["pooled_prompt_embeds"]], dim=0),
            }
        return {"embeds": t["prompt_embeds"], "pooled": t["pooled_prompt_embeds"]}

    def _velocity(self, x: torch.Tensor, sigma_t: torch.Tensor, cond: Condition, ctx: dict) -> torch.Tensor:
        timestep = sigma_t * 1000  # float32, as the pipeline passes scheduler.timesteps (no dtype cast)
        if self.do_cfg:
            x = torch.cat([x, x], dim=0)
            timestep = torch.cat([timestep, timestep], dim=0)
        out = self.pipe.transformer(
            hidden_states=x,
            timestep=timestep,
            encoder_hidden_states=ctx["embeds"],
            pooled_projections=ctx["pooled"],
            joint_attention_kwargs=None,
            return_dict=False,
        )[0]
        if self.do_cfg:
            uncond, text = out.chunk(2)
            out = uncond + self.guidance_scale * (text - uncond)
        return out

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        vae = self.pipe.vae
        lat = (latents / vae.config.scaling_factor) + vae.config.shift_factor
        image = vae.decode(lat, return_dict=False)[0]
        return self._postprocess(image)

    # ---- tiny pipeline (tests) ----------------------------------------------------------------------
    @classmethod
    def tiny_pipeline(cls, *, max_latent_side: int = 32, mu_tokens: int | None = None):
        """A random-weight StableDiffusion3Pipeline (two CLIPs and a T5) with SD3.5's scheduler config, a few
        thousand parameters wide; draws from torch's global generator (build it through
        `jsbench.backbones.tiny.build_tiny_pipeline("sd35", seed)`). `max_latent_side`: the largest latent
        grid the transformer's position table covers (128 for the real models' 1024^2 latents)."""
        import diffusers
        from transformers import CLIPTextModelWithProjection

        from jsbench.backbones.tiny import clip_config, t5_encoder, tiny_clip_tokenizer, tiny_t5_tokenizer, tiny_vae

        transformer = diffusers.SD3Transformer2DModel(
            sample_size=16,
            patch_size=2,
            in_channels=4,
            num_layers=2,
            attention_head_dim=8,
            num_attention_heads=2,
            caption_projection_dim=16,
            joint_attention_dim=64,  # = T5 width, so CLIP's 32+32 features pad (not crop) to it
            pooled_projection_dim=64,
            out_channels=4,
            pos_embed_max_size=max(16, max_latent_side // 2),
        )
        # SD3.5's scheduler config: static shift 3
        scheduler = diffusers.FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0)
        return diffusers.StableDiffusion3Pipeline(
            transformer=transformer,
            scheduler=scheduler,
            vae=tiny_vae(4, 0.0609, 1.5305),
            text_encoder=CLIPTextModelWithProjection(clip_config(projection=32)),
            tokenizer=tiny_clip_tokenizer(),
            text_encoder_2=CLIPTextModelWithProjection(clip_config(projection=32)),
            tokenizer_2=tiny_clip_tokenizer(),
            text_encoder_3=t5_encoder(64),
            tokenizer_3=tiny_t5_tokenizer(),
        )


class SD35LargeBackbone(SD35Backbone):
    """SD3.5 Large: same pipeline and adapter, bigger MMDiT."""

    name = "sd35-large"
    default_model_id = "stabilityai/stable-diffusion-3.5-large"
    train_batch = 8  # ~28 GB of bf16 weights (8B MMDiT), CFG doubles every row
    eval_batch = 8
    full_size = {  # SD3.5 Large transformer/config.json
        "network": "SD3Transformer2DModel",
        "config": dict(
            sample_size=128, patch_size=2, in_channels=16, out_channels=16, num_layers=38, attention_head_dim=64,
            num_attention_heads=38, joint_attention_dim=4096, caption_projection_dim=2432, pooled_projection_dim=2048,
            pos_embed_max_size=192, qk_norm="rms_norm",
        ),
        "latent_channels": 16, "clip_len": 77, "text_dim": 4096, "pooled": 2048, "cfg_batch": 2,
        "text_encoders": {"text_encoder": "clip-l-proj", "text_encoder_2": "clip-g", "text_encoder_3": "t5-xxl"}, "vae": "sd3",
    }


class SD35MediumBackbone(SD35Backbone):
    name = "sd35-medium"


@register("sd35")
def _sd35(model: str | None = None, device: str | None = None, **options) -> SD35Backbone:
    return SD35Backbone(model=model, device=device, **options)


@register("sd35-medium")
def _sd35_medium(model: str | None = None, device: str | None = None, **options) -> SD35MediumBackbone:
    return SD35MediumBackbone(model=model, device=device, **options)


@register("sd35-large")
def _sd35_large(model: str | None = None, device: str | None = None, **options) -> SD35LargeBackbone:
    return SD35LargeBackbone(model=model, device=device, **options)

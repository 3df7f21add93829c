"""`sdxl`: SD-XL base behind the Backbone protocol, on StableDiffusionXLPipeline's parts, Euler sampler.

Clock. SD-XL is a DDPM (epsilon) model: its UNet is conditioned on a discrete training timestep, and
EulerDiscreteScheduler integrates in Karras/EDM "VE" sigma, x = x_0 + s eps. The policy speaks
*normalised flow time* u (see `jsbench/backbones/sdxl_clock.py`): the flow time t = s / (1 + s)
divided by the flow time of the first noise level the pipeline's own N-step schedule uses. So u = 1 is
where the pipeline starts (with SD-XL's "leading" spacing that depends on N: tau = 981 for 50 steps,
751 for 4), u = 0 the clean image. `default_sigmas` is the pipeline's schedule on that clock; `sample`
maps any schedule to VE sigmas and UNet timesteps (diffusers' own sigma->timestep interpolation) and
runs EulerDiscreteScheduler's step arithmetic per row. Because the schedule must start at u = 1, the
initial-noise scale (the scheduler's init_noise_sigma) is the same for every row, as in the pipeline.

Guidance: classifier-free guidance at the pipeline's default scale 5.0 with its default negative
prompt: none, which SD-XL base's config (`force_zeros_for_empty_prompt`) turns into zero embeddings.
The policy reads the pooled embedding of the second text encoder ([B, 1280], SD-XL's `text_embeds`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import torch

from jsbench.backbones import register
from jsbench.backbones._diffusers import BackboneLoadError, DiffusersBackbone, div_as_scheduler, mul_as_scheduler
from jsbench.backbones.base import Condition
from jsbench.backbones.sdxl_clock import flow_sigmas_from_ve, timesteps_from_ve_sigmas, ve_sigma_table, ve_sigmas_from_flow
from jsbench.schedule import ScheduleError

__all__ = ["SDXLBackbone"]


class SDXLBackbone(DiffusersBackbone):
    name = "sdxl"
    default_model_id = "stabilityai/stable-diffusion-xl-base-1.0"
    default_image_size = 1024  # px, square: the real model's default image (its UNet's sample_size 128 x VAE factor 8)
    pipeline_class_name = "StableDiffusionXLPipeline"
    default_steps = 50
    default_guidance = 5.0
    tiny_sampling = {"height": 32, "width": 32}
    full_size = {  # stabilityai/stable-diffusion-xl-base-1.0 unet/config.json
        "network": "UNet2DConditionModel",
        "config": dict(
            sample_size=128, in_channels=4, out_channels=4, layers_per_block=2,
            block_out_channels=(320, 640, 1280), down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), transformer_layers_per_block=(1, 2, 10),
            attention_head_dim=(5, 10, 20), cross_attention_dim=2048, use_linear_projection=True,
            addition_embed_type="text_time", addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816,
        ),
        "latent_channels": 4, "clip_len": 77, "text_dim": 2048, "pooled": 1280, "cfg_batch": 2,
        "text_encoders": {"text_encoder": "clip-l", "text_encoder_2": "clip-g"}, "vae": "sdxl",  # full_size.TEXT_ENCODERS, VAES
    }
    clock_kind = "discrete"  # normalised flow time over EulerDiscreteScheduler's VE sigmas (the DiscreteClock calls below)
    ays_schedule = "StableDiffusionXLSigmas"  # diffusers' AysSchedules entry for SD-XL
    # memory (docs/real-backbones.md): ~7 GB of bf16 weights; CFG runs every row twice through the UNet
    train_batch = 16
    eval_batch = 16
    decode_chunk = 4

    def __init__(self, model: str | None = None, device=None, dtype=None, **options):
        super().__init__(model=model, device=device, dtype=dtype, **options)
        from diffusers import EulerDiscreteScheduler

        # Whatever scheduler the pipeline folder ships, the sampler is Euler on its noise schedule.
        self.scheduler = EulerDiscreteScheduler.from_config(self.pipe.scheduler.config)
        cfg = self.scheduler.config
        if cfg.prediction_type not in ("epsilon", "v_prediction") or cfg.timestep_type != "discrete":
            raise BackboneLoadError(f"sdxl: unsupported scheduler config (prediction {cfg.prediction_type}, timesteps {cfg.timestep_type})")
        if cfg.final_sigmas_type != "zero":
            raise BackboneLoadError("sdxl: the schedule must end at sigma = 0 (final_sigmas_type='zero')")
        self.max_steps = int(cfg.num_train_timesteps)
        self.table = ve_sigma_table(self.scheduler.alphas_cumprod)  # VE sigma per training timestep
        # StableDiffusionXLPipeline decodes in float32 when the VAE is fp16 and its config sets `force_upcast`
        # (SD-XL base's VAE overflows in fp16: NaN or black images). It upcasts per call and casts back; the
        # VAE is kept in float32 here instead (~0.3 GB at full size), which decodes the same numbers.
        self.vae_upcast = self.vae.dtype == torch.float16 and bool(self.vae.config.get("force_upcast", False))
        if self.vae_upcast:
            self.vae.to(dtype=torch.float32)
        self._defaults = lru_cache(maxsize=64)(self._pipeline_schedule)

    def _default_resolution(self) -> tuple[int, int]:
        side = int(self.pipe.unet.config.sample_size) * self.vae_scale_factor
        return side, side

    @property
    def pooled_dim(self) -> int:
        return int(self.pipe.text_encoder_2.config.projection_dim)

    @property
    def token_dim(self) -> int:
        return int(self.pipe.unet.config.cross_attention_dim)  # both CLIPs' hidden states, concatenated

    @property
    def latent_channels(self) -> int:
        return int(self.pipe.unet.config.in_channels)

    @property
    def do_cfg(self) -> bool:
        return self.guidance_scale > 1 and self.pipe.unet.config.time_cond_proj_dim is None

    # ---- the clock ----------------------------------------------------------------------------------
    def _pipeline_schedule(self, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(VE sigmas [N+1], timesteps [N]) of the pipeline's own N-step schedule (float32, CPU)."""
        from diffusers import EulerDiscreteScheduler

        sch = EulerDiscreteScheduler.from_config(self.scheduler.config)
        sch.set_timesteps(steps)
        return sch.sigmas.to(torch.float32).clone(), sch.timesteps.to(torch.float32).clone()

    def ve_start(self, steps: int) -> torch.Tensor:
        """The VE sigma u = 1 stands for at N steps: the first noise level of the pipeline's schedule."""
        return self._defaults(steps)[0][0]

    def default_sigmas(self, steps: int, x_T: torch.Tensor) -> torch.Tensor:
        """[B, N+1] float32: the pipeline's schedule ("leading" spacing, offset 1) in normalised flow time."""
        if not isinstance(steps, int) or not 1 <= steps <= self.max_steps:
            raise ScheduleError(f"sdxl: steps must be an integer in [1, {self.max_steps}], got {steps!r}")
        u = self._default_u(steps)
        if (u[1:] >= u[:-1]).any():
            raise ScheduleError(f"sdxl: the pipeline's {steps}-step schedule repeats a noise level")
        return u.to(self.device).expand(x_T.shape[0], -1).clone()

    def ve_sigmas(self, sigmas: torch.Tensor) -> torch.Tensor:
        """Policy clock [B, N+1] -> VE sigmas [B, N+1] (float32) for this step count."""
        return self._clock(sigmas)[0]

    def _default_u(self, steps: int) -> torch.Tensor:
        ve, _ = self._defaults(steps)
        u = flow_sigmas_from_ve(ve, ve[0])
        u[0], u[-1] = 1.0, 0.0
        return u

    def _clock(self, sigmas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy clock [B, N+1] -> (VE sigmas [B, N+1], UNet timesteps [B, N]), float32.

        Rows equal to `default_sigmas(N)` get the pipeline's own VE sigmas and integer timesteps bit for
        bit; converting them through float arithmetic would move them by an ulp, and in bf16 with CFG an
        ulp is visible. Every other row goes through the clock conversion in sdxl_clock.py.
        """
        steps = sigmas.shape[-1] - 1
        ve = ve_sigmas_from_flow(sigmas, self.ve_start(steps)).to(sigmas.device)
        taus = timesteps_from_ve_sigmas(ve[:, :-1], self.table).to(sigmas.device)
        d_ve, d_tau = self._defaults(steps)
        is_default = (sigmas.to(torch.float32) == self._default_u(steps).to(sigmas.device)).all(dim=1)
        if is_default.any():
            ve = torch.where(is_default[:, None], d_ve.to(sigmas.device), ve)
            taus = torch.where(is_default[:, None], d_tau.to(sigmas.device), taus)
        return ve, taus

    def scheduler_sigma_range(self) -> tuple[float | None, float | None]:
        """(sigma_min, sigma_max) of the scheduler config, where it sets them (None otherwise)."""
        cfg = self.scheduler.config
        return cfg.get("sigma_min"), cfg.get("sigma_max")

    @property
    def timestep_spacing(self) -> str:
        return str(self.scheduler.config.timestep_spacing)

    def pipeline_sigmas(self, sigmas_row: torch.Tensor) -> list[float]:
        """`sigmas=` for StableDiffusionXLPipeline (EulerDiscreteScheduler takes all N+1 VE sigmas)."""
        return self.ve_sigmas(sigmas_row[None].to(torch.float32))[0].cpu().tolist()

    # ---- protocol -----------------------------------------------------------------------------------
    @torch.no_grad()
    def _encode_prompts(self, prompts: Sequence[str]) -> Condition:
        prompts = list(prompts)
        pe, npe, pooled, npooled = self.pipe.encode_prompt(
            prompt=prompts, prompt_2=None, device=self.device, num_images_per_prompt=1,
            do_classifier_free_guidance=self.do_cfg, negative_prompt=None,
        )
        tensors = {"prompt_embeds": pe, "pooled_prompt_embeds": pooled}
        if self.do_cfg:
            tensors.update(negative_prompt_embeds=npe, negative_pooled_prompt_embeds=npooled)
        # the policy reads both CLIPs' hidden states (pe), masked to the prompt's tokens
        mask = self._token_mask(self.pipe.tokenizer or self.pipe.tokenizer_2, prompts, pe.shape[1])
        return Condition(prompts=prompts, pooled=pooled.detach().float(), tensors=tensors, tokens=pe.detach(), token_mask=mask)

    def _added_cond(self, cond: Condition, batch: int) -> tuple[torch.Tensor, dict]:
        t = cond.tensors
        pe = t["prompt_embeds"]
        time_ids = self.pipe._get_add_time_ids(
            (self.height, self.width), (0, 0), (self.height, self.width), dtype=pe.dtype,
            text_encoder_projection_dim=int(self.pipe.text_encoder_2.config.projection_dim),
        ).to(self.device)
        if self.do_cfg:
            if "negative_prompt_embeds" not in t:
                raise ScheduleError(f"sdxl: guidance {self.guidance_scale} needs a condition encoded with guidance on")
            embeds = torch.cat([t["negative_prompt_embeds"], pe], dim=0)
            text_embeds = torch.cat([t["negative_pooled_prompt_embeds"], t["pooled_prompt_embeds"]], dim=0)
            time_ids = time_ids.repeat(2 * batch, 1)
        else:
            embeds, text_embeds = pe, t["pooled_prompt_embeds"]
            time_ids = time_ids.repeat(batch, 1)
        return embeds, {"text_embeds": text_embeds, "time_ids": time_ids}

    @torch.no_grad()
    def sample_latents(self, x_T: torch.Tensor, cond: Condition, sigmas: torch.Tensor) -> torch.Tensor:
        """One batched Euler loop in VE sigma, row b on its own sigmas and UNet timesteps.

        Mirrors StableDiffusionXLPipeline + EulerDiscreteScheduler (s_churn = 0): x = x_T * init_noise_sigma;
        per step the UNet sees x / sqrt(s^2 + 1) at timestep tau(s); x0 = x - s eps; x += (x - x0)/s * (s' - s).
        """
        sigmas = self._check_batch(x_T, cond, sigmas)
        ve, taus = self._clock(sigmas)  # [B, N+1] VE sigmas, [B, N] UNet timesteps, float32
        B = x_T.shape[0]
        view = (B, 1, 1, 1)
        vmax = ve.max(dim=1).values.view(view)
        spacing = self.scheduler.config.timestep_spacing
        init = vmax if spacing in ("linspace", "trailing") else (vmax**2 + 1) ** 0.5
        x = mul_as_scheduler(init, x_T.to(self.device, self.dtype), scalar_first=False)  # latents * init_noise_sigma
        embeds, added = self._added_cond(cond, B)
        g = self.guidance_scale
        eps_pred = self.scheduler.config.prediction_type == "epsilon"
        for i in range(ve.shape[1] - 1):
            s, s_next = ve[:, i], ve[:, i + 1]
            s_in, tau = (torch.cat([s, s]), torch.cat([taus[:, i], taus[:, i]])) if self.do_cfg else (s, taus[:, i])
            x_in = torch.cat([x, x]) if self.do_cfg else x
            x_in = div_as_scheduler(x_in, ((s_in**2 + 1) ** 0.5).view(-1, 1, 1, 1))  # scale_model_input
            out = self.pipe.unet(
                x_in, tau, encoder_hidden_states=embeds, timestep_cond=None, cross_attention_kwargs=None,
                added_cond_kwargs=added, return_dict=False,
            )[0]
            if self.do_cfg:
                uncond, text = out.chunk(2)
                out = uncond + g * (text - uncond)
            # EulerDiscreteScheduler.step
            sample = x.to(torch.float32)
            sv = s.view(view)
            if eps_pred:
                x0 = sample - mul_as_scheduler(sv, out)
            else:  # v-prediction
                x0 = mul_as_scheduler(-sv / (sv**2 + 1) ** 0.5, out, scalar_first=False) + div_as_scheduler(sample, sv**2 + 1)
            derivative = div_as_scheduler(sample - x0, sv)
            dt = s_next.view(view) - sv
            x = (sample + derivative * dt).to(out.dtype)
        return x

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        vae = self.pipe.vae
        if self.vae_upcast:  # the pipeline casts the latents to the upcast VAE's dtype before unscaling them
            latents = latents.to(vae.dtype)
        mean, std = getattr(vae.config, "latents_mean", None), getattr(vae.config, "latents_std", None)
        if mean is not None and std is not None:
            c = latents.shape[1]
            mean = torch.tensor(mean).view(1, c, 1, 1).to(latents.device, latents.dtype)
            std = torch.tensor(std).view(1, c, 1, 1).to(latents.device, latents.dtype)
            lat = latents * std / vae.config.scaling_factor + mean
        else:
            lat = latents / vae.config.scaling_factor
        image = vae.decode(lat.to(vae.dtype), return_dict=False)[0]
        return self._postprocess(image)

    # ---- tiny pipeline (tests) ----------------------------------------------------------------------
    @classmethod
    def tiny_pipeline(cls, *, max_latent_side: int = 32, mu_tokens: int | None = None):
        """A random-weight StableDiffusionXLPipeline with the real classes and SD-XL base's scheduler config,
        a few thousand parameters wide; draws from torch's global generator (build it through
        `jsbench.backbones.tiny.build_tiny_pipeline("sdxl", seed)`). The options are the SD3/Flux builders'."""
        import diffusers
        from transformers import CLIPTextModel, CLIPTextModelWithProjection

        from jsbench.backbones.tiny import clip_config, tiny_clip_tokenizer, tiny_vae

        unet = diffusers.UNet2DConditionModel(
            block_out_channels=(8, 16),
            layers_per_block=1,
            sample_size=16,  # x vae_scale_factor 2 = the pipeline's default 32 px
            in_channels=4,
            out_channels=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            attention_head_dim=(2, 4),
            use_linear_projection=True,
            addition_embed_type="text_time",
            addition_time_embed_dim=8,
            transformer_layers_per_block=(1, 1),
            projection_class_embeddings_input_dim=6 * 8 + 32,
            cross_attention_dim=64,
            norm_num_groups=4,
        )
        # the real SD-XL base scheduler config (leading spacing, offset 1, scaled-linear betas)
        scheduler = diffusers.EulerDiscreteScheduler(
            beta_start=0.00085,
            beta_end=0.012,
            beta_schedule="scaled_linear",
            steps_offset=1,
            timestep_spacing="leading",
            interpolation_type="linear",
            prediction_type="epsilon",
            num_train_timesteps=1000,
        )
        return diffusers.StableDiffusionXLPipeline(
            vae=tiny_vae(4, None, 0.13025),
            text_encoder=CLIPTextModel(clip_config()),
            text_encoder_2=CLIPTextModelWithProjection(clip_config()),
            tokenizer=tiny_clip_tokenizer(),
            tokenizer_2=tiny_clip_tokenizer(),
            unet=unet,
            scheduler=scheduler,
            add_watermarker=False,
        )


@register("sdxl")
def _sdxl(model: str | None = None, device: str | None = None, **options) -> SDXLBackbone:
    return SDXLBackbone(model=model, device=device, **options)

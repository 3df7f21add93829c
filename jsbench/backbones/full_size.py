"""The real models at full size with random weights: denoisers, text encoders, VAEs and whole pipelines.

Each diffusers adapter declares `full_size` (its published network class and config.json, latent channels,
CLIP tokens, text and pooled widths, `cfg_batch` rows per image, and the names of its text encoders and VAE
in TEXT_ENCODERS and VAES below). This module turns that into the networks, the inputs of one denoising
step at the class's `default_image_size` (1024^2), and the whole pipeline (`full_size_pipeline`: the real
pipeline class, scheduler config and components, with the small offline tokenizers of the tiny pipelines),
created directly on any device in any dtype: on `meta` for parameter and FLOP counts (no memory, no time;
scripts/bench_backbones.py, `jsbench policies size`) and on a GPU for seconds and peak memory
(`--model full-size-random`, scripts/gpu_day_one.py). Nothing is materialised on the CPU first: 12B bf16
parameters are created where they run.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from jsbench.backbones import backbone_class, declared_by_class, declaring_name
from jsbench.backbones._diffusers import FULL_SIZE_RANDOM  # the `--model` value that builds full_size_pipeline
from jsbench.backbones.tiny import REAL_VAE_FACTOR

__all__ = ["FULL_SIZE", "FULL_SIZE_RANDOM", "full_size_owner", "TEXT_ENCODERS", "VAES", "full_size", "full_size_network", "full_size_text_encoder",
           "full_size_vae", "full_size_pipeline", "component_sizes", "stored_numel", "step_inputs", "measure_denoiser_step",
           "text_encode_flops", "vae_decode_flops"]

# every backbone whose own class sets `full_size`, in the registry's order
FULL_SIZE = declared_by_class("full_size")


_CLIP_L = dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
               max_position_embeddings=77, hidden_act="quick_gelu", projection_dim=768, layer_norm_eps=1e-5)
#: the real pipelines' text encoders (transformers class, config.json values), by the names the adapters'
#: `full_size["text_encoders"]` use. Token ids: the tiny tokenizers' (bos 0, eos 1, pad 1; every id is below 600,
#: inside both vocabularies), so the pooled output is read at the first end token as with the real tokenizers.
TEXT_ENCODERS = {
    # openai/clip-vit-large-patch14's text tower (SD-XL's and Flux's text_encoder/config.json): pooled, no projection
    "clip-l": ("CLIPTextModel", _CLIP_L),
    # the same tower with its 768x768 text projection (SD3.5's text_encoder/config.json)
    "clip-l-proj": ("CLIPTextModelWithProjection", _CLIP_L),
    # OpenCLIP ViT-bigG-14's text tower (SD-XL's and SD3.5's text_encoder_2/config.json)
    "clip-g": ("CLIPTextModelWithProjection", dict(
        vocab_size=49408, hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20,
        max_position_embeddings=77, hidden_act="gelu", projection_dim=1280, layer_norm_eps=1e-5)),
    # google/t5-v1_1-xxl's encoder (SD3.5's text_encoder_3, Flux's text_encoder_2 config.json)
    "t5-xxl": ("T5EncoderModel", dict(
        vocab_size=32128, d_model=4096, d_ff=10240, d_kv=64, num_heads=64, num_layers=24, feed_forward_proj="gated-gelu",
        relative_attention_num_buckets=32, relative_attention_max_distance=128, layer_norm_epsilon=1e-6,
        tie_word_embeddings=False)),
}
_VAE = dict(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
            block_out_channels=(128, 256, 512, 512), layers_per_block=2, norm_num_groups=32, sample_size=1024, force_upcast=True)
#: the real pipelines' VAEs (diffusers' AutoencoderKL, vae/config.json values): one architecture, 8x down, differing in
#: latent channels, quant convs and the latent scaling the samplers divide by
VAES = {
    "sdxl": dict(_VAE, latent_channels=4, scaling_factor=0.13025),  # stabilityai/sdxl-vae
    "sd3": dict(_VAE, latent_channels=16, scaling_factor=1.5305, shift_factor=0.0609, use_quant_conv=False, use_post_quant_conv=False),
    "flux": dict(_VAE, latent_channels=16, scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False, use_post_quant_conv=False),
}


def full_size_owner(name: str) -> str | None:
    """The FULL_SIZE entry that sizes backbone `name`: its own, or the one its class inherits (sd35-medium: sd35's);
    None for a backbone without a published size (the embedded worlds, scenes-dit)."""
    return declaring_name(name, "full_size")


def full_size(kind: str) -> dict:
    """FULL_SIZE[kind] plus what backbone `kind`'s class declares: `default_steps`, `text_len` (CLIP tokens +
    the adapter's T5 length, where it has a T5), and `latent`, the sampler's latent at the class's
    `default_image_size` (8x VAE): [C, h, w], or Flux's packed [tokens, 4C] (2x2 patches)."""
    spec = dict(FULL_SIZE[kind])
    cls = backbone_class(kind)
    side = cls.default_image_size // REAL_VAE_FACTOR
    c = spec["latent_channels"]
    spec["default_steps"] = cls.default_steps
    spec["text_len"] = spec["clip_len"] + int(cls.max_sequence_length)
    spec["latent"] = ((side // 2) ** 2, 4 * c) if spec["network"] == "FluxTransformer2DModel" else (c, side, side)
    return spec


@contextmanager
def _created_on(device, dtype: torch.dtype):
    """Modules built inside are created on `device` in `dtype`: a 12B float32 copy, or one on the CPU, never exists."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(previous)


def _finished(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    if any(p.dtype != dtype for p in module.parameters()):  # a module that made its own float32 parameters
        module = module.to(dtype=dtype)
    return module.eval().requires_grad_(False)


def full_size_network(kind: str, device="meta", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """The full-size denoiser of backbone `kind` with random weights, created on `device` in `dtype`."""
    import diffusers

    spec = full_size(kind)
    with _created_on(device, dtype):
        net = getattr(diffusers, spec["network"])(**spec["config"])
    return _finished(net, dtype)


def full_size_text_encoder(name: str, device="meta", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Text encoder `name` of TEXT_ENCODERS with random weights, created on `device` in `dtype`."""
    import transformers

    class_name, values = TEXT_ENCODERS[name]
    model_cls = getattr(transformers, class_name)
    config = model_cls.config_class(**values, **({"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1} if "clip" in name else {}))
    with _created_on(device, dtype):
        encoder = model_cls(config)
    return _finished(encoder, dtype)


def full_size_vae(name: str, device="meta", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """VAE `name` of VAES with random weights, created on `device` in `dtype`."""
    from diffusers import AutoencoderKL

    with _created_on(device, dtype):
        vae = AutoencoderKL(**VAES[name])
    return _finished(vae, dtype)


def _denoiser_slot(kind: str) -> str:
    return "unet" if full_size(kind)["network"] == "UNet2DConditionModel" else "transformer"


def full_size_pipeline(kind: str, device="meta", dtype: torch.dtype = torch.float32):
    """Backbone `kind`'s whole diffusers pipeline at full size with random weights, every network created on
    `device` in `dtype`: the real pipeline class with the real scheduler config and the small offline tokenizers
    of its tiny pipeline (`tiny_pipeline`), and the full-size denoiser, text encoders and VAE in their slots."""
    spec = full_size(kind)
    with torch.random.fork_rng(devices=[]):  # the tiny networks it builds and drops draw from the global generator
        tiny = backbone_class(kind).tiny_pipeline()
    components = dict(tiny.components)
    components[_denoiser_slot(kind)] = full_size_network(kind, device, dtype)
    for slot, name in spec["text_encoders"].items():
        components[slot] = full_size_text_encoder(name, device, dtype)
    components["vae"] = full_size_vae(spec["vae"], device, dtype)
    pipe = type(tiny)(**components)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def stored_numel(module: torch.nn.Module) -> int:
    """Entries of `module`'s weights as its checkpoint stores them: parameters (each shared one once) and
    floating-point buffers (SD3.5's positional table, 226M entries in Medium's MMDiT-X)."""
    return sum(p.numel() for p in module.parameters()) + sum(b.numel() for b in module.buffers() if b.is_floating_point())


def component_sizes(kind: str) -> dict:
    """{"denoiser": n, "text_encoders": {name: n}, "vae": n}: stored weight entries (`stored_numel`) of backbone
    `kind`'s full-size components, text encoders by their TEXT_ENCODERS name, counted on the meta device."""
    spec = full_size(kind)
    return {"denoiser": stored_numel(full_size_network(kind)),
            "text_encoders": {name: stored_numel(full_size_text_encoder(name)) for name in spec["text_encoders"].values()},
            "vae": stored_numel(full_size_vae(spec["vae"]))}


def _flops(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def text_encode_flops(kind: str) -> int:
    """FLOPs of encoding one image's prompt with backbone `kind`'s full-size text encoders: every encoder on its
    full padded length (CLIP 77 tokens, T5 the adapter's `max_sequence_length`), `cfg_batch` rows (the negative
    prompt beside the prompt under guidance); counted on the meta device."""
    spec = full_size(kind)
    cls = backbone_class(kind)
    total = 0
    for name in spec["text_encoders"].values():
        encoder = full_size_text_encoder(name)
        length = int(cls.max_sequence_length) if name == "t5-xxl" else int(TEXT_ENCODERS[name][1]["max_position_embeddings"])
        ids = torch.zeros(spec["cfg_batch"], length, dtype=torch.long, device="meta")
        total += _flops(lambda: encoder(input_ids=ids))
    return total


def vae_decode_flops(kind: str) -> int:
    """FLOPs of decoding one image at the class's default size (1024^2) with backbone `kind`'s full-size VAE (meta)."""
    spec = full_size(kind)
    vae = full_size_vae(spec["vae"])
    side = backbone_class(kind).default_image_size // REAL_VAE_FACTOR
    latent = torch.empty(1, spec["latent_channels"], side, side, device="meta")
    return _flops(lambda: vae.decode(latent, return_dict=False))


def step_inputs(kind: str, device="meta", dtype: torch.dtype = torch.float32) -> tuple[tuple, dict]:
    """(args, kwargs) of one denoiser call at 1024^2 for one image (`cfg_batch` rows: 2 under CFG)."""
    spec = full_size(kind)
    B, T, D = spec["cfg_batch"], spec["text_len"], spec["text_dim"]

    def t(*shape, scale=1.0):
        return torch.randn(*shape, device=device, dtype=dtype) * scale if device != "meta" else torch.empty(*shape, device=device, dtype=dtype)

    if spec["network"] == "UNet2DConditionModel":
        args = (t(B, *spec["latent"]), torch.full((B,), 500.0, device=device))
        kw = dict(encoder_hidden_states=t(B, T, D),
                  added_cond_kwargs={"text_embeds": t(B, spec["pooled"]), "time_ids": torch.full((B, 6), 1024.0, device=device, dtype=dtype)})
        return args, kw
    kw = dict(hidden_states=t(B, *spec["latent"]), timestep=torch.full((B,), 0.5 if spec["network"] == "FluxTransformer2DModel" else 500.0, device=device, dtype=dtype),
              encoder_hidden_states=t(B, T, D), pooled_projections=t(B, spec["pooled"]))
    if spec["network"] == "FluxTransformer2DModel":
        S = spec["latent"][0]
        side = int(S**0.5)
        img_ids = torch.zeros(side, side, 3, device=device, dtype=dtype)
        if device != "meta":
            img_ids[..., 1] = torch.arange(side, device=device, dtype=dtype)[:, None]
            img_ids[..., 2] = torch.arange(side, device=device, dtype=dtype)[None, :]
        kw.update(guidance=torch.full((B,), 3.5, device=device, dtype=torch.float32) if spec["config"]["guidance_embeds"] else None,
                  txt_ids=torch.zeros(T, 3, device=device, dtype=dtype), img_ids=img_ids.reshape(S, 3))
    return (), kw


def measure_denoiser_step(kind: str, device, dtype: torch.dtype = torch.bfloat16, repeat: int = 3) -> dict:
    """One full-size denoiser step of `kind` at 1024^2 (one image, CFG pair where the model uses one):
    parameters, seconds per step (median of `repeat` after a warm-up) and peak memory in GiB on CUDA
    (weights included; the `--plan` numbers). On another device the step runs once, untimed."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    net = full_size_network(kind, device, dtype)
    params = sum(p.numel() for p in net.parameters())
    weights = torch.cuda.memory_allocated(device) if cuda else None
    args, kw = step_inputs(kind, device, dtype)
    times = []
    with torch.no_grad():
        for _ in range(1 + (repeat if cuda else 0)):
            if cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            out = net(*args, **kw, return_dict=False)[0]
            if cuda:
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - start)
    # `images` is what the step's FLOP count (`step_flops`, guidance pair included) is per; `rows`, the network's batch
    row = {"network": full_size(kind)["network"], "params": params, "images": 1, "rows": full_size(kind)["cfg_batch"],
           "latent": list(full_size(kind)["latent"]), "output_shape": list(out.shape),
           "finite": bool(torch.isfinite(out).all()) if device.type != "meta" else None,
           "seconds_per_step": round(sorted(times[1:])[len(times[1:]) // 2], 4) if cuda else None,
           "weights_gib": round(weights / 2**30, 3) if cuda else None,
           "peak_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 3) if cuda else None}
    del net, out
    if cuda:
        torch.cuda.empty_cache()
    return row

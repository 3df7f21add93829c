"""Training the `scenes-dit` backbone: a tiny SD3-style text-to-image pipeline with learned weights, on
the scene world's renders; the library behind scripts/train_scene_backbone.py (whose docstring gives the
stages and the command lines). Every stage resumes from its own checkpoint in the work folder.

Sizes: a 48x48 canvas, an AutoencoderKL to 12x12x8 latents, an SD3Transformer2DModel of 4 layers, two
random frozen CLIP text encoders over a word-level tokenizer of the world's words, no T5; chosen so one
DiT update (batch 64) is ~0.3 s on 2 CPU cores.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import torch
from tqdm import tqdm

from jsbench import JsbenchError

# sizes: chosen so one DiT update (batch 64) is ~0.3 s on 2 CPU cores
CANVAS = 48
VAE_BLOCKS = (32, 32, 64)
LATENT_CHANNELS = 8
DIT = dict(patch_size=2, num_layers=4, attention_head_dim=32, num_attention_heads=4)
CLIP_HIDDEN = 32
TOKENS = 16  # CLIP context: <bos> + up to 14 words + <eos>; the longest world prompt is 10 words
T5_TOKENS = 1  # SD3 pipelines without T5 append this many zero tokens
GUIDANCE = 3.0
DEFAULT_STEPS = 28


# ---- text side ------------------------------------------------------------------------------------------
def world_words() -> list[str]:
    import re

    from jsbench.world.scenes import make_prompts

    return sorted({w for p in make_prompts() for w in re.findall(r"[a-z]+", p["prompt"].lower())})


def build_tokenizer():
    """A CLIP BPE tokenizer whose merges spell every world word as ONE token; other text falls back to bytes."""
    from transformers import CLIPTokenizer

    from jsbench.backbones.tiny import bytes_to_unicode

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in bytes_to_unicode().values():  # every byte's printable stand-in: any text tokenizes
        vocab.setdefault(ch, len(vocab))
        vocab.setdefault(ch + "</w>", len(vocab))
    merges: list[tuple[str, str]] = []
    # longest words first: a word's chain then outranks the shorter words' merges that could cut into it
    for word in sorted(world_words(), key=lambda w: (-len(w), w)):
        # left-to-right chain: ((w o) r) d</w>
        parts = list(word[:-1]) + [word[-1] + "</w>"]
        left = parts[0]
        for right in parts[1:]:
            pair = (left, right)
            if pair not in merges:
                merges.append(pair)
            left = left + right
            vocab.setdefault(left, len(vocab))
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=TOKENS)


def build_text_encoder(vocab_size: int, seed: int):
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    torch.manual_seed(seed)
    cfg = CLIPTextConfig(
        vocab_size=vocab_size, hidden_size=CLIP_HIDDEN, intermediate_size=4 * CLIP_HIDDEN, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=TOKENS, projection_dim=CLIP_HIDDEN,
        bos_token_id=0, eos_token_id=1, pad_token_id=1, hidden_act="gelu",
    )
    return CLIPTextModelWithProjection(cfg).eval().requires_grad_(False)


# ---- image side -------------------------------------------------------------------------------------------
def build_vae(seed: int):
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    n = len(VAE_BLOCKS)
    return AutoencoderKL(
        in_channels=3, out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * n, up_block_types=("UpDecoderBlock2D",) * n,
        block_out_channels=VAE_BLOCKS, layers_per_block=1, latent_channels=LATENT_CHANNELS, norm_num_groups=8,
        sample_size=CANVAS, use_quant_conv=False, use_post_quant_conv=False, mid_block_add_attention=False,
        scaling_factor=1.0, shift_factor=0.0,
    )


def build_transformer(seed: int):
    from diffusers import SD3Transformer2DModel

    torch.manual_seed(seed)
    side = CANVAS // 2 ** (len(VAE_BLOCKS) - 1)
    inner = DIT["attention_head_dim"] * DIT["num_attention_heads"]
    return SD3Transformer2DModel(
        sample_size=side, in_channels=LATENT_CHANNELS, out_channels=LATENT_CHANNELS,
        joint_attention_dim=2 * CLIP_HIDDEN, caption_projection_dim=inner, pooled_projection_dim=2 * CLIP_HIDDEN,
        pos_embed_max_size=side // DIT["patch_size"], **DIT,
    )


def build_scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0)  # SD3.5's static shift


# ---- data -------------------------------------------------------------------------------------------------
class SceneData:
    """Exact draws from every scene prompt's mixture, rendered; batch `step` depends only on (seed, step)."""

    def __init__(self, seed: int):
        from jsbench.world import EmbeddedWorld
        from jsbench.world.scenes import make_prompts

        self.prompts = [p["prompt"] for p in make_prompts()]
        self.world = EmbeddedWorld()
        self.table, self.rows = self.world.table(self.prompts)
        self.seed = seed

    def batch(self, step: int, size: int, stream: int) -> tuple[torch.Tensor, torch.Tensor]:
        from jsbench.world.render import render_scenes

        g = torch.Generator().manual_seed(self.seed * 1_000_003 + stream * 10_007 + step)
        pick = torch.randint(len(self.prompts), (size,), generator=g)
        x0 = self.table.sample_data(self.rows[pick], g)
        return pick, render_scenes(x0) * 2.0 - 1.0  # VAE range [-1, 1]


# ---- checkpoints ---------------------------------------------------------------------------------------------
def save_atomic(obj, path: Path) -> None:
    from jsbench.io import replacing

    with replacing(path) as tmp:
        torch.save(obj, tmp)


def load_checkpoint(path: Path):
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a checkpoint is replaced atomically, so this is real corruption
        raise JsbenchError(f"checkpoint {path} is corrupt ({type(exc).__name__}); delete it to restart that stage") from None


# ---- stages -----------------------------------------------------------------------------------------------
class Stop(Exception):
    """--stop-after reached: the checkpoint is written, rerun the same command to continue."""


def _budget(args) -> None:
    args.updates_done += 1
    if args.stop_after is not None and args.updates_done >= args.stop_after:
        raise Stop


def _resume(path: Path, opt, **modules) -> int:
    """Load a stage's checkpoint into its modules and optimizer; the step to continue from (0: none)."""
    state = load_checkpoint(path)
    if state is None:
        return 0
    for key, module in modules.items():
        module.load_state_dict(state[key])
    opt.load_state_dict(state["opt"])
    return state["step"]


def _end_of_update(args, step: int, total: int, path: Path, opt, **modules) -> None:
    """Checkpoint atomically (every --checkpoint-every, at the end, and before --stop-after stops), then count the update."""
    last = args.stop_after is not None and args.updates_done + 1 >= args.stop_after
    if (step + 1) % args.checkpoint_every == 0 or step + 1 == total or last:
        save_atomic({**{k: m.state_dict() for k, m in modules.items()}, "opt": opt.state_dict(), "step": step + 1}, path)
    _budget(args)


def train_vae(args, data: SceneData, work: Path):
    vae = build_vae(args.seed)
    opt = torch.optim.AdamW(vae.parameters(), lr=args.vae_lr, weight_decay=0.0)
    path = work / "vae.pt"
    start = _resume(path, opt, model=vae)
    vae.train()
    bar = tqdm(range(start, args.vae_steps), desc="vae", initial=start, total=args.vae_steps, disable=not args.progress)
    for step in bar:
        _, images = data.batch(step, args.vae_batch, stream=1)
        torch.manual_seed(args.seed * 7919 + step)  # the posterior sample of this step
        post = vae.encode(images).latent_dist
        recon = vae.decode(post.sample()).sample
        l1 = _foreground_l1(recon, images, args.foreground_weight)
        kl = post.kl().mean() / images[0].numel()
        loss = l1 + args.kl_weight * kl
        lr = args.vae_lr * min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * step / args.vae_steps))
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.set_postfix(l1=f"{l1.item():.4f}", kl=f"{kl.item():.3f}")
        _end_of_update(args, step, args.vae_steps, path, opt, model=vae)
    return vae.eval().requires_grad_(False)


def _foreground_l1(recon: torch.Tensor, images: torch.Tensor, weight: float) -> torch.Tensor:
    """L1 with object pixels weighted up: objects are a few percent of the pixels, and with a plain L1
    the grey background is all an autoencoder learns."""
    from jsbench.world.scenes import BACKGROUND

    background = torch.tensor(BACKGROUND).view(1, 3, 1, 1) * 2 - 1
    foreground = ((images - background).abs().amax(1, keepdim=True) > 0.05).float()
    return ((recon - images).abs() * (1 + weight * foreground)).mean()


def train_decoder(args, data: SceneData, vae, work: Path):
    """Fine-tune the VAE decoder alone, encoder frozen (as SD's ft-MSE decoders were): the latents the
    DiT learns are unchanged, so this stage runs independently of (and concurrently with) the DiT's."""
    path = work / "decoder.pt"
    decoder = [vae.decoder] + ([vae.post_quant_conv] if vae.post_quant_conv is not None else [])
    params = [p.requires_grad_(True) for m in decoder for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=args.decoder_lr, weight_decay=0.0)
    start = _resume(path, opt, model=vae)
    bar = tqdm(range(start, args.decoder_steps), desc="decoder", initial=start, total=args.decoder_steps, disable=not args.progress)
    for step in bar:
        _, images = data.batch(step, args.vae_batch, stream=4)
        with torch.no_grad():
            z = vae.encode(images).latent_dist.mode()  # what the DiT is trained to produce
        vae.decoder.train()
        loss = _foreground_l1(vae.decode(z).sample, images, args.foreground_weight)
        for group in opt.param_groups:
            group["lr"] = args.decoder_lr * 0.5 * (1 + math.cos(math.pi * step / args.decoder_steps))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.set_postfix(l1=f"{loss.item():.4f}")
        _end_of_update(args, step, args.decoder_steps, path, opt, model=vae)
    return vae.eval().requires_grad_(False)


@torch.no_grad()
def encode_dataset(args, data: SceneData, vae, work: Path):
    """(prompt index, latent) pairs, latents normalised SD3-style: (z - shift) * scale with unit variance."""
    path = work / "latents.pt"
    state = load_checkpoint(path)
    if state is not None and state["size"] == args.data and state["vae_steps"] == args.vae_steps:
        return state
    chunks, picks = [], []
    batch = 256
    for i in tqdm(range(0, args.data, batch), desc="encode", disable=not args.progress):
        pick, images = data.batch(i // batch, min(batch, args.data - i), stream=2)
        chunks.append(vae.encode(images).latent_dist.mode())
        picks.append(pick)
    z = torch.cat(chunks)
    shift = z.mean().item()
    scale = 1.0 / (z - shift).std().item()
    state = {"size": args.data, "vae_steps": args.vae_steps, "prompt_index": torch.cat(picks),
             "latents": (z - shift) * scale, "shift_factor": shift, "scaling_factor": scale}
    save_atomic(state, path)
    return state


@torch.no_grad()
def encode_prompts(pipe, prompts: list[str]):
    """Per prompt (and for "", the unconditional caption): SD3's joint embeddings and pooled vector."""
    embeds, _, pooled, _ = pipe.encode_prompt(
        prompt=prompts + [""], prompt_2=None, prompt_3=None, device="cpu", do_classifier_free_guidance=False,
        max_sequence_length=T5_TOKENS,
    )
    return embeds, pooled


def train_dit(args, data: SceneData, dataset, text, work: Path):
    transformer = build_transformer(args.seed)
    ema = build_transformer(args.seed)
    ema.load_state_dict(transformer.state_dict())
    ema.requires_grad_(False)
    opt = torch.optim.AdamW(transformer.parameters(), lr=args.dit_lr, weight_decay=0.0)
    path = work / "dit.pt"
    start = _resume(path, opt, model=transformer, ema=ema)
    embeds, pooled = text
    uncond = len(data.prompts)  # index of "" in the text tables
    latents, prompt_index = dataset["latents"], dataset["prompt_index"]
    transformer.train()
    bar = tqdm(range(start, args.dit_steps), desc="dit", initial=start, total=args.dit_steps, disable=not args.progress)
    running = None
    for step in bar:
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + 3 * 10_007 + step)
        pick = torch.randint(latents.shape[0], (args.batch,), generator=g)
        x0 = latents[pick]
        caption = prompt_index[pick].clone()
        caption[torch.rand(args.batch, generator=g) < args.caption_dropout] = uncond
        noise = torch.randn(x0.shape, generator=g)
        t = torch.sigmoid(torch.randn(args.batch, generator=g))  # SD3's logit-normal(0, 1) times
        x_t = (1 - t.view(-1, 1, 1, 1)) * x0 + t.view(-1, 1, 1, 1) * noise
        target = noise - x0
        pred = transformer(hidden_states=x_t, timestep=t * 1000, encoder_hidden_states=embeds[caption],
                           pooled_projections=pooled[caption], return_dict=False)[0]
        loss = (pred - target).square().mean()
        lr = args.dit_lr * min(1.0, (step + 1) / 200) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.dit_steps)))
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(transformer.parameters(), 1.0)
        opt.step()
        decay = min(args.ema, (1 + step) / (10 + step))
        with torch.no_grad():
            for e, p in zip(ema.parameters(), transformer.parameters()):
                e.lerp_(p, 1 - decay)
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        bar.set_postfix(loss=f"{running:.4f}")
        _end_of_update(args, step, args.dit_steps, path, opt, model=transformer, ema=ema)
    return ema.eval()


def assemble(args, vae, tokenizer, encoders, transformer=None):
    from diffusers import StableDiffusion3Pipeline

    return StableDiffusion3Pipeline(
        transformer=transformer if transformer is not None else build_transformer(args.seed),
        scheduler=build_scheduler(), vae=vae,
        text_encoder=encoders[0], tokenizer=tokenizer, text_encoder_2=encoders[1], tokenizer_2=tokenizer,
        text_encoder_3=None, tokenizer_3=None,
    )


def save_pipeline(pipe, out: Path, meta: dict) -> None:
    """Written to a sibling temp folder, then swapped in: a killed save never leaves a half pipeline."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    pipe.save_pretrained(tmp, safe_serialization=True)
    # save_pretrained leaves out components that are None; from_pretrained wants them listed as null
    index_path = tmp / "model_index.json"
    index = json.loads(index_path.read_text())
    for name in ("text_encoder_3", "tokenizer_3", "image_encoder", "feature_extractor"):
        index.setdefault(name, [None, None])
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    (tmp / "jsbench.json").write_text(json.dumps(meta, indent=2) + "\n")
    old = out.with_name(out.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)

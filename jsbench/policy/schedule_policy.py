"""Schedule policies: a Dirichlet over the N step increments of the schedule.

`DirichletSchedulePolicy` reads the initial noise x_T and the pooled prompt embedding and outputs, in
one pass, the concentration alpha of a Dirichlet over the simplex; the increments are
Delta = floor + (1 - N*floor) * D with D ~ Dir(alpha), so every step is at least `floor`.
`GlobalSchedulePolicy` has one learned alpha and no inputs: it isolates what conditioning adds.
`CrossAttentionSchedulePolicy` (arch "xattn", jsbench/policy/xattn.py) reads x_T through a multi-scale
encoder whose features cross-attend to the prompt's per-token embeddings (`Condition.tokens`).

Both start at the backbone's default schedule: the last layer is zero and alpha = c0 * D_default, so
the Dirichlet mean of an untrained policy *is* the default schedule, and evaluation (which uses the
mean, deterministically) reproduces the default exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from jsbench import JsbenchError, __version__
from jsbench.devices import pick_device
from jsbench.io import replacing, write_json_atomic
from jsbench.policy.peers import TPDMNetwork
from jsbench.schedule import default_floor, floor_increments, increments_from_sigmas, sigmas_from_increments, unfloor_increments

LOG_ALPHA_MIN = math.log(1e-3)  # below this a Dirichlet sampler underflows to exact zeros
LOG_ALPHA_MAX = math.log(1e5)  # above this log-probabilities lose all precision
SIMPLEX_EPS = 1e-12


POLICY_ARCHS = ("small", "xattn")
# instance: the one-shot Dirichlet of (x_T, c); prompt, global: its ablations; tpdm, indis: the peer methods
# (jsbench/policy/peers.py, docs/peer-methods.md)
POLICY_KINDS = ("instance", "prompt", "global", "tpdm", "indis")


class PolicyError(JsbenchError):
    pass


@dataclass
class PolicyConfig:
    kind: str  # "instance" (prompt + noise), "prompt" (prompt only), "global"; "tpdm", "indis" (jsbench/policy/peers.py)
    steps: int
    pooled_dim: int
    latent_shape: tuple[int, ...]
    default_increments: list[float]
    concentration: float = 32.0
    floor: float | None = None
    width: int = 128
    depth: int = 2  # the small arch's trunk layers; xattn's cross-attention blocks
    arch: str = "small"  # "small" (pooled prompt + noise features, summed, an MLP) or "xattn"; old manifests: small
    token_dim: int | None = None  # width of the prompt's token embeddings (xattn)

    def __post_init__(self):
        self.latent_shape = tuple(self.latent_shape)
        if self.arch not in POLICY_ARCHS:
            raise PolicyError(f"unknown policy architecture {self.arch!r} ({' or '.join(POLICY_ARCHS)})")
        if self.arch == "xattn":
            if self.kind not in ("instance", "indis"):
                raise PolicyError(f"the xattn architecture reads the noise and the prompt's tokens: a {self.kind} policy takes arch small")
            if not self.token_dim:
                raise PolicyError("the xattn architecture needs the width of the prompt's token embeddings (token_dim)")
        if self.floor is None:
            self.floor = default_floor(self.steps)
        if self.kind not in POLICY_KINDS:
            raise PolicyError(f"unknown policy kind {self.kind!r} ({', '.join(POLICY_KINDS[:-1])} or {POLICY_KINDS[-1]})")
        if len(self.default_increments) != self.steps:
            raise PolicyError("default_increments must have one entry per step")


class SchedulePolicy(nn.Module):
    """What both policies share: alpha -> distribution, samples, log-probs, mean schedule, save/load."""

    config: PolicyConfig

    def _init_alpha_offset(self) -> None:
        default = torch.tensor(self.config.default_increments, dtype=torch.float64)
        simplex = unfloor_increments(default, self.config.floor).clamp_min(1e-6)
        simplex = simplex / simplex.sum()
        self.register_buffer("log_alpha0", torch.log(self.config.concentration * simplex).to(torch.float32))

    def log_alpha(self, x_T: torch.Tensor, pooled: torch.Tensor, tokens=None, token_mask=None) -> torch.Tensor:
        raise NotImplementedError

    # `tokens` [B, T, D] and `token_mask` [B, T] (a Condition's) are read by the xattn arch, ignored by the others
    def concentration(self, x_T: torch.Tensor, pooled: torch.Tensor, tokens=None, token_mask=None) -> torch.Tensor:
        """alpha [B, N], clamped so the Dirichlet can neither underflow nor overflow."""
        return self.log_alpha(x_T, pooled, tokens, token_mask).clamp(LOG_ALPHA_MIN, LOG_ALPHA_MAX).exp()

    def distribution(self, x_T, pooled, tokens=None, token_mask=None) -> torch.distributions.Dirichlet:
        return torch.distributions.Dirichlet(self.concentration(x_T, pooled, tokens, token_mask))

    def sample_simplex(self, x_T, pooled, samples: int, tokens=None, token_mask=None) -> torch.Tensor:
        """[B, K, N] points of the simplex, strictly inside it (no exact zeros)."""
        with torch.no_grad():
            alpha = self.concentration(x_T, pooled, tokens, token_mask)
            draws = torch.distributions.Dirichlet(alpha).sample((samples,)).transpose(0, 1)
        draws = draws.clamp_min(SIMPLEX_EPS)
        return draws / draws.sum(-1, keepdim=True)

    def log_prob(self, x_T, pooled, simplex: torch.Tensor, tokens=None, token_mask=None) -> torch.Tensor:
        """log Dir(simplex | alpha(x_T, c)) for simplex [B, K, N] -> [B, K]."""
        alpha = self.concentration(x_T, pooled, tokens, token_mask)
        return torch.distributions.Dirichlet(alpha[:, None, :]).log_prob(simplex)

    def increments(self, simplex: torch.Tensor) -> torch.Tensor:
        return floor_increments(simplex, self.config.floor)

    def sigmas(self, simplex: torch.Tensor) -> torch.Tensor:
        return sigmas_from_increments(self.increments(simplex))

    @torch.no_grad()
    def mean_sigmas(self, x_T, pooled, tokens=None, token_mask=None) -> torch.Tensor:
        """The deterministic evaluation schedule: sigmas of the Dirichlet mean, [B, N+1]."""
        return self.differentiable_sigmas(x_T, pooled, tokens, token_mask)

    def differentiable_sigmas(self, x_T, pooled, tokens=None, token_mask=None) -> torch.Tensor:
        """`mean_sigmas` with gradients in the parameters (`--policy indis` back-propagates through the sampler)."""
        alpha = self.concentration(x_T, pooled, tokens, token_mask)
        return self.sigmas(alpha / alpha.sum(-1, keepdim=True))

    def schedule_for(self, x_T, cond, backbone=None) -> torch.Tensor:
        """The evaluation schedule of rows (x_T, cond) [B, N+1]; a one-shot policy reads no backbone (a tpdm
        policy, whose schedule depends on the intermediate latents, does)."""
        return self.mean_sigmas(x_T, cond.pooled, cond.tokens, cond.token_mask)

    # ------------------------------------------------------------------------------------ persistence

    def save(self, directory: str | Path, manifest: dict) -> Path:
        """Write weights (safetensors) and manifest.json atomically; the manifest carries the checksum."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        weights = directory / "policy.safetensors"
        with replacing(weights) as tmp:
            save_file({k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}, str(tmp))
            checksum = sha256_file(tmp)
        full = {
            **manifest,
            "kind": self.config.kind,
            "steps": self.config.steps,
            "config": asdict(self.config),
            "checksum": checksum,
            "jsbench_version": __version__,
            "parameters": sum(p.numel() for p in self.parameters()),
        }
        write_json_atomic(directory / "manifest.json", full)
        return directory


def build_policy(config: PolicyConfig) -> SchedulePolicy:
    if config.kind == "tpdm":
        return TPDMPolicy(config)
    if config.kind == "global":
        return GlobalSchedulePolicy(config)
    if config.arch == "xattn":
        return CrossAttentionSchedulePolicy(config)
    return DirichletSchedulePolicy(config)


def build_policy_on(config: PolicyConfig, backbone=None, device=None) -> SchedulePolicy:
    """`build_policy` with every parameter and buffer created where the policy lives (`device` if given,
    else the backbone's device, else the CPU), in float32 whatever the backbone's dtype: the policy's
    Dirichlet and its log-probabilities need float32 (bf16 would merge sigmas near 1)."""
    with torch.device(pick_device(device, default=getattr(backbone, "device", None) or "cpu")):
        return build_policy(config).to(dtype=torch.float32)


def default_arch(backbone) -> str:
    """`train`'s architecture when none is asked: small on the embedded worlds (their shipped policies are
    small ones), xattn on the real backbones."""
    return "small" if backbone.draws_embedded_world else "xattn"


def make_policy(backbone, steps: int, kind: str = "instance", device=None, **options) -> SchedulePolicy:
    """A fresh float32 policy on the backbone's device, at a step budget, starting at its default schedule.
    `arch="xattn"` without width/depth takes `xattn.xattn_defaults` for the backbone's latent."""
    if steps < 1 or steps > backbone.max_steps:
        raise PolicyError(f"steps must be in 1..{backbone.max_steps} for backbone {backbone.name}, got {steps}")
    probe = backbone.initial_noise([0])
    default = increments_from_sigmas(backbone.default_sigmas(steps, probe).double())[0].cpu().tolist()
    if options.get("arch") == "xattn":
        from jsbench.policy.xattn import xattn_defaults

        width, blocks = xattn_defaults(backbone.latent_shape)
        options = {"width": width, "depth": blocks, **{k: v for k, v in options.items() if v is not None}}
        options.setdefault("token_dim", getattr(backbone, "token_dim", None))
    config = PolicyConfig(kind=kind, steps=steps, pooled_dim=backbone.pooled_dim, latent_shape=backbone.latent_shape, default_increments=default, **options)
    return build_policy_on(config, backbone, device)


class TPDMPolicy(TPDMNetwork, SchedulePolicy):
    """`--policy tpdm`: a Beta ratio per step from the current latent, time and prompt (jsbench/policy/peers.py,
    docs/peer-methods.md), saved and loaded like every policy."""


class GlobalSchedulePolicy(SchedulePolicy):
    """One alpha for every prompt and noise."""

    def __init__(self, config: PolicyConfig):
        super().__init__()
        self.config = config
        self._init_alpha_offset()
        self.delta = nn.Parameter(torch.zeros(config.steps))

    def log_alpha(self, x_T, pooled, tokens=None, token_mask=None):
        return (self.log_alpha0 + self.delta).expand(pooled.shape[0], -1)


class DirichletSchedulePolicy(SchedulePolicy):
    """alpha(x_T, c): features of the noise and the prompt, an MLP, log-alpha out (zero-initialised)."""

    def __init__(self, config: PolicyConfig):
        super().__init__()
        self.config = config
        self._init_alpha_offset()
        w = config.width
        self.text = nn.Sequential(nn.Linear(config.pooled_dim, w), nn.SiLU())
        self.noise = None
        if config.kind in ("instance", "indis"):
            if len(config.latent_shape) == 1:
                self.noise = nn.Sequential(nn.Linear(config.latent_shape[0], w), nn.SiLU())
            else:
                from jsbench.policy.features import LatentFeatures

                self.noise = LatentFeatures(config.latent_shape, w)
        layers: list[nn.Module] = []
        for _ in range(config.depth):
            layers += [nn.Linear(w, w), nn.SiLU()]
        self.trunk = nn.Sequential(*layers)
        self.head = nn.Linear(w, config.steps)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def log_alpha(self, x_T, pooled, tokens=None, token_mask=None):
        h = self.text(pooled.to(self.head.weight.dtype))
        if self.noise is not None:
            h = h + self.noise(x_T.to(self.head.weight.dtype))
        return self.log_alpha0 + self.head(self.trunk(h))


class CrossAttentionSchedulePolicy(SchedulePolicy):
    """alpha(x_T, c): multi-scale noise features cross-attending to the prompt's tokens, an MLP, log-alpha out
    (zero-initialised head: the untrained policy is the default schedule). See jsbench/policy/xattn.py."""

    def __init__(self, config: PolicyConfig):
        super().__init__()
        from jsbench.policy.xattn import CrossAttentionFeatures

        self.config = config
        self._init_alpha_offset()
        w = config.width
        self.features = CrossAttentionFeatures(config.latent_shape, config.pooled_dim, config.token_dim, w, config.depth)
        self.trunk = nn.Sequential(nn.SiLU(), nn.Linear(w, w), nn.SiLU())
        self.head = nn.Linear(w, config.steps)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def log_alpha(self, x_T, pooled, tokens=None, token_mask=None):
        if tokens is None or token_mask is None:
            raise PolicyError("the xattn policy reads the prompt's tokens: pass the Condition's tokens and token_mask")
        dtype = self.head.weight.dtype
        h = self.features(x_T.to(dtype), pooled.to(dtype), tokens.to(dtype), token_mask)
        return self.log_alpha0 + self.head(self.trunk(h))


# ---------------------------------------------------------------------------------------------- loading


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(directory: str | Path) -> dict:
    directory = Path(directory)
    path = directory / "manifest.json"
    if not path.is_file():
        raise PolicyError(f"no policy at {directory}: {path.name} is missing (train one with `jsbench train --out {directory}`)")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PolicyError(f"corrupt policy manifest {path}: {exc.__class__.__name__}") from None


def list_policies(root: str | Path) -> list[dict]:
    """Every policy under `root` (each folder holding a manifest.json), sorted by path: its `path` as a user
    can pass it back, backbone, steps, kind, network arch, baseline, reward and checksum from the manifest (None where it has
    none), `converged` from its heldout.jsonl (jsbench.policy.convergence; None: not judged), and `_short`, the folder relative to `root`. Refuses a `root` that is not a folder."""
    from jsbench.policy.convergence import run_convergence
    from jsbench.workspace import display_path

    root = Path(root)
    if not root.is_dir():
        raise PolicyError(f"no policies folder at {root}; pass --root FOLDER")
    rows = []  # a manifest's config without "arch" predates the option: its policy is built small
    for manifest in sorted(root.rglob("manifest.json")):
        m = read_manifest(manifest.parent)
        rows.append({"path": display_path(manifest.parent), "backbone": m.get("backbone"), "steps": m.get("steps"), "kind": m.get("kind"),
                     "arch": (m["config"].get("arch", "small") if m.get("config") else None), "baseline": m.get("baseline"), "reward": m.get("reward"), "train_seed": (m.get("train") or {}).get("seed"),
                     "converged": run_convergence(manifest.parent)["converged"], "checksum": m.get("checksum"),
                     "_short": manifest.parent.relative_to(root)})
    return rows


def load_policy(directory: str | Path, backbone=None, steps: int | None = None, device=None) -> tuple[SchedulePolicy, dict]:
    """Load a saved policy, verifying its checksum and, if given, that it fits the backbone and budget.

    The policy is built in float32 on `device` (default: the backbone's device, else the CPU).
    Weights are read with safetensors: loading never executes code from the file.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    manifest = read_manifest(directory)
    weights = directory / "policy.safetensors"
    if not weights.is_file():
        raise PolicyError(f"policy {directory} has a manifest but no policy.safetensors")
    if sha256_file(weights) != manifest.get("checksum"):
        raise PolicyError(f"policy {directory} is corrupt: policy.safetensors does not match the checksum in its manifest")
    if backbone is not None and manifest.get("backbone") != backbone.name:
        raise PolicyError(f"policy {directory} was trained for backbone {manifest.get('backbone')!r}, not {backbone.name!r}")
    if steps is not None and manifest.get("steps") != steps:
        raise PolicyError(f"policy {directory} was trained for {manifest.get('steps')} steps, not {steps}")
    try:
        config = PolicyConfig(**manifest["config"])
        policy = build_policy_on(config, backbone, device)
        policy.load_state_dict(load_file(str(weights)))  # CPU tensors, copied into the device's parameters
    except (KeyError, TypeError, RuntimeError, SafetensorError) as exc:
        raise PolicyError(f"policy {directory} cannot be loaded: {str(exc).splitlines()[0]}") from None
    policy.eval()
    return policy, manifest

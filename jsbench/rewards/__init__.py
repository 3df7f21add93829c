"""Rewards: images + prompts -> one float per image, registered by name.

A reward is a `Reward`: a `name`, `__call__(images [B,3,H,W] in [0,1], prompts) -> Tensor[B]`, and
`check_prompts(prompts)`, which refuses the prompts it cannot score (by default none); or a plain function
`(images, prompts) -> Tensor[B]`, which scores every prompt (`check_reward_prompts`).
Adding a reward is adding one module that calls `register_reward("name")` on a factory
`factory(backbone) -> Reward` (the backbone lets a reward pick an evaluator that fits it, e.g. the
embedded world's exact detector).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from jsbench import JsbenchError
from jsbench.registry import Registry

__all__ = ["Reward", "register_reward", "load_reward", "available_rewards", "check_reward_prompts", "UnknownReward"]


class Reward:
    """A reward: images and their prompts in, one value per image out."""

    name: str = ""

    def __call__(self, images: torch.Tensor, prompts: Sequence[str]) -> torch.Tensor:
        raise NotImplementedError

    def check_prompts(self, prompts: Sequence[str]) -> None:
        """Raise a JsbenchError naming the first prompt this reward cannot score; training calls it on its
        prompts before anything is written. Every prompt by default."""


def check_reward_prompts(reward, prompts: Sequence[str]) -> None:
    """Refuse, in one JsbenchError, the first prompt `reward` cannot score: a `Reward` says which; a plain
    function scores every prompt."""
    if isinstance(reward, Reward):
        reward.check_prompts(prompts)


class UnknownReward(JsbenchError):
    pass


# Known names -> their module, so a lookup imports only that module; a reward not listed here is still
# found (the registry imports this package's modules on a miss), so a new reward needs no line here.
_MODULES: dict[str, str] = {"geneval": "jsbench.rewards.geneval", "ocr": "jsbench.rewards.ocr", "ocr-flowgrpo": "jsbench.rewards.ocr", "hps": "jsbench.rewards.clip", "clip": "jsbench.rewards.clip"}


_REGISTRY = Registry("reward", UnknownReward, _MODULES, package="jsbench.rewards")
register_reward = _REGISTRY.register
available_rewards = _REGISTRY.names


def load_reward(name: str, backbone=None) -> Reward:
    return _REGISTRY.get(name)(backbone)

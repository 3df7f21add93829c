"""The embedded world's geneval reward and suite refuse a batch whose image count is not the prompt count
(they used to zip the two and drop the extra images in silence)."""

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.rewards import load_reward
from jsbench.suites import load_suite
from jsbench.world.render import render_scenes
from jsbench.world.scenes import scene_mixture


def _three_images(meta: dict) -> torch.Tensor:
    means = scene_mixture(meta).means.float()
    return render_scenes(means[torch.arange(3) % means.shape[0]])


def test_world_reward_and_suite_refuse_three_images_for_one_prompt():
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    item = suite.items("test")[0]
    images = _three_images(item.metadata)
    assert suite.score(images[:1], [item])[0].keys() == {"correct"}  # one image per item is scored
    with pytest.raises(ValueError, match="3 images for 1 items"):
        suite.score(images, [item])
    reward = load_reward("geneval", bb)
    assert reward(images[:1], [item.prompt]).shape == (1,)
    with pytest.raises(ValueError, match="3 images for 1 items"):
        reward(images, [item.prompt])

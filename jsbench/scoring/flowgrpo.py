"""Flow-GRPO's OCR reward, as its flow_grpo/ocr.py computes it.

- target: `prompt.split('"')[1]`, the text after the prompt's first ASCII double quote up to the next one
  (to the end of the prompt if there is no second); curly and single quotes mark nothing;
- read text: the engine's detections joined with no separator (Flow-GRPO keeps those PaddleOCR scores
  above 0; here the engine keeps what it keeps, rapidocr those scoring at least its `min_score`);
- both lose their ASCII spaces (only those: tabs and newlines stay) and are lowercased;
- dist = 0 when the target occurs inside the read text, else their Levenshtein distance, capped at the
  target's length; the reward is 1 - dist / len(target).

Where Flow-GRPO's code fails (no double quote: an IndexError; an empty target: a division by zero) the
reward refuses in one line; where its OCR call raises, Flow-GRPO gives 0 and jsbench lets the error stand.
"""

from __future__ import annotations

from typing import Sequence

from jsbench import JsbenchError
from jsbench.scoring.text import edit_distance

__all__ = ["flowgrpo_target", "flowgrpo_reward"]


def flowgrpo_target(prompt: str) -> str:
    """The text after the prompt's first `"` up to the next (or the end)."""
    parts = prompt.split('"')
    if len(parts) < 2:
        raise JsbenchError(f"the ocr-flowgrpo reward needs a double-quoted target in every prompt; none in {prompt!r}")
    return parts[1]


def flowgrpo_reward(detections: Sequence[str], prompt: str) -> float:
    """One image's reward from its detections and its prompt."""
    target = flowgrpo_target(prompt).replace(" ", "").lower()
    if not target:
        raise JsbenchError(f"the ocr-flowgrpo reward needs a non-empty double-quoted target; {prompt!r} quotes nothing but spaces")
    read = "".join(detections).replace(" ", "").lower()
    dist = 0 if target in read else min(edit_distance(read, target), len(target))
    return 1 - dist / len(target)

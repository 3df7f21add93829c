"""MARIO-Eval's OCR metrics, per image and pooled, as TextDiffuser's eval/ocr_eval.py computes them.

The rules, each as ocr_eval.py has it (jsbench's own reading, `jsbench.scoring.text`, differs in each; see
docs/ocr-protocols.md):
- targets: the prompt is stripped and lowercased, then every span inside ASCII single quotes (`'(.*?)'`,
  non-greedy, so `'Joe's Diner'` yields `joe`) is split on whitespace into target words;
- reading unit: each detection the engine returns is one read token, stripped and lowercased, never split
  (a line reading "hello world" is the one token `hello world`), and a blank detection is a token too;
- matching: each read token, in order, removes one equal target (a multiset match); precision = matched /
  (read tokens + 1e-8), recall = matched / (targets + 1e-8), so nothing read or nothing targeted gives 0;
- accuracy: the sorted read tokens joined with no separator equal the sorted targets joined, so a prompt
  with no target scores accuracy 1 exactly when nothing but blanks is read;
- pooling: precision, recall and accuracy are each the mean over every image, and F = 2PR / (P + R + 1e-8)
  of the pooled P and R.
"""

from __future__ import annotations

import re
from typing import Sequence

__all__ = ["EPSILON", "mario_targets", "mario_tokens", "mario_image_metrics", "mario_f_measure", "mario_pooled"]

EPSILON = 1e-8  # ocr_eval.py's guard in every division, kept: its values are ours to the last bit
_SINGLE_QUOTED = re.compile(r"'(.*?)'")


def mario_targets(prompt: str) -> list[str]:
    """The words inside the prompt's ASCII single quotes, from the stripped, lowercased prompt."""
    return [word for span in _SINGLE_QUOTED.findall(prompt.strip().lower()) for word in span.split()]


def mario_tokens(detections: Sequence[str]) -> list[str]:
    """The read tokens: one per detection, stripped and lowercased, blank ones kept."""
    return [d.strip().lower() for d in detections]


def mario_image_metrics(detections: Sequence[str], prompt: str) -> dict[str, float]:
    """One image's `precision`, `recall` and `accuracy` from its detections and its prompt."""
    read = mario_tokens(detections)
    targets = [t.strip().lower() for t in mario_targets(prompt)]
    unmatched = list(targets)
    matched = 0
    for token in read:
        if token in unmatched:
            unmatched.remove(token)
            matched += 1
    return {
        "accuracy": 1.0 if "".join(sorted(read)) == "".join(sorted(targets)) else 0.0,
        "precision": matched / (len(read) + EPSILON),
        "recall": matched / (len(targets) + EPSILON),
    }


def mario_f_measure(precision: float, recall: float) -> float:
    """ocr_eval.py's F-measure of pooled precision and recall."""
    return 2 * precision * recall / (precision + recall + EPSILON)


def mario_pooled(scores: Sequence[dict[str, float]]) -> dict[str, float]:
    """What ocr_eval.py prints for one method: each metric's mean over every image, and F from those means."""
    n = len(scores)
    pooled = {m: sum(s[m] for s in scores) / n for m in ("precision", "recall", "accuracy")}
    pooled["f_measure"] = mario_f_measure(pooled["precision"], pooled["recall"])
    return pooled

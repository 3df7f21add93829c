"""Text-rendering scores with no model inside: the quoted spans of a prompt and MARIO-Eval's metrics.

MARIO-Eval (TextDiffuser's eval/ocr_eval.py), under its names: the targets are the words inside the
prompt's quotes (double quotes, else MARIO's single quotes); read words and targets are lowercased and
matched as multisets; per image `precision` = matched / read words, `recall` = matched / target words,
`accuracy` = the sorted read words joined equal the sorted targets joined; MARIO pools every image and takes
its F-measure from the pooled precision and recall (`jsbench.suites.ocr`). Beside them: `word_accuracy`
(every target word read, MARIO's recall = 1), the normalised edit distance `ned`, and `ocr_reward`, the OCR
reward of Flow-GRPO's code (see `ocr_reward`). The OCR engines that produce the read text are in
`jsbench.rewards.ocr_engines`.
"""

from __future__ import annotations

import re
from typing import Sequence

from rapidfuzz.distance import Levenshtein

__all__ = [
    "quoted_spans",
    "target_words",
    "read_words",
    "match_precision_recall",
    "word_accuracy",
    "exact_match",
    "edit_distance",
    "normalized_edit_distance",
    "ocr_reward",
    "f_measure",
    "image_metrics",
]

_DOUBLE = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]*)[\"\u201c\u201d]")
_SINGLE = re.compile(r"(?<![^\W_])['\u2018\u2019](.*?)['\u2018\u2019](?![^\W_])")


def quoted_spans(prompt: str) -> list[str]:
    """The quoted text of a prompt: double-quoted spans, or else single-quoted ones (MARIO-Eval's style,
    `a poster that reads 'open late'`). An apostrophe inside a word (don't, 'Mike's bar') opens or closes
    no span; MARIO's own regex `'(.*?)'` would pair it."""
    spans = [s.strip() for s in _DOUBLE.findall(prompt)]
    spans = [s for s in spans if s]
    if not spans:
        spans = [s.strip() for s in _SINGLE.findall(prompt)]
        spans = [s for s in spans if s]
    return spans


# ------------------------------------------------------------------------------------------- metrics


def target_words(prompt: str) -> list[str]:
    """MARIO-Eval's targets: the words inside the prompt's quotes, lowercased (empty if none)."""
    return [w for span in quoted_spans(prompt) for w in span.lower().split()]


def read_words(text: str) -> list[str]:
    """The words of an OCR read-out, lowercased, split on whitespace."""
    return text.lower().split()


def match_precision_recall(read: Sequence[str], targets: Sequence[str]) -> tuple[float, float]:
    """Multiset matching of read words against target words (both lowercased): (precision, recall).

    Nothing read gives precision 0 (MARIO divides by len + 1e-8), no targets gives recall 0.
    """
    read = [w.strip().lower() for w in read]
    left = [w.strip().lower() for w in targets]
    matched = 0
    for word in read:
        if word in left:
            left.remove(word)
            matched += 1
    precision = matched / len(read) if read else 0.0
    recall = matched / len(targets) if targets else 0.0
    return precision, recall


def word_accuracy(read: Sequence[str], targets: Sequence[str]) -> float:
    """1.0 when every target word (with multiplicity) is among the read words, else 0.0."""
    return 1.0 if targets and match_precision_recall(read, targets)[1] == 1.0 else 0.0


def exact_match(read: Sequence[str], targets: Sequence[str]) -> float:
    """MARIO-Eval's `accuracy`: the sorted read words, joined, equal the sorted target words, joined."""
    a = "".join(sorted(w.strip().lower() for w in read))
    b = "".join(sorted(w.strip().lower() for w in targets))
    return 1.0 if a == b else 0.0


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions, each cost 1), by rapidfuzz.

    rapidfuzz's C++ bit-parallel Levenshtein equals the textbook dynamic programme (checked against one
    on random pairs in tests/test_ocr_metrics.py) and is much faster (scripts/bench_ocr_metrics.py).
    """
    return Levenshtein.distance(a, b)


def _squash(text: str) -> str:
    return "".join(text.lower().split())


def normalized_edit_distance(read_text: str, target_text: str) -> float:
    """dist / max(len) on the space-free lowercase strings: 0 is a perfect read, 1 nothing in common."""
    a, b = _squash(read_text), _squash(target_text)
    if not a and not b:
        return 0.0
    return edit_distance(a, b) / max(len(a), len(b))


def ocr_reward(read_text: str, target_text: str, contains_ok: bool = True) -> float:
    """Flow-GRPO's OCR reward (flow_grpo/ocr.py): 1 - min(dist, len) / len, dist the edit distance of the
    space-free lowercase read text to the space-free lowercase target (len its length), and dist = 0 when
    the target occurs inside the read text (`contains_ok`, on as in its code; off gives the plain formula).

    What still differs from Flow-GRPO's code: its target is the prompt's first double-quoted span, ours every
    quoted span (the same for one-span prompts, all the text world's); its read text keeps every PaddleOCR
    line scoring > 0, ours what the engine keeps (rapidocr: score >= 0.5); it removes only spaces, we all
    whitespace (engines return single spaces)."""
    a, b = _squash(read_text), _squash(target_text)
    if not b:
        raise ValueError("the OCR reward needs a non-empty target text")
    dist = 0 if contains_ok and b in a else edit_distance(a, b)
    return 1.0 - min(dist, len(b)) / len(b)


def f_measure(precision: float, recall: float) -> float:
    """MARIO's F-measure from (pooled) precision and recall, 0 when both are 0."""
    return 2.0 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def image_metrics(read_text: str, prompt: str) -> dict[str, float]:
    """Every per-image metric of one OCR read-out against one prompt's quoted words."""
    targets = target_words(prompt)
    if not targets:
        raise ValueError(f"prompt has no quoted text to score: {prompt!r}")
    read = read_words(read_text)
    precision, recall = match_precision_recall(read, targets)
    target_text = " ".join(targets)
    return {
        "word_accuracy": word_accuracy(read, targets),
        "accuracy": exact_match(read, targets),
        "precision": precision,
        "recall": recall,
        "ned": normalized_edit_distance(read_text, target_text),
        "ocr_reward": ocr_reward(read_text, target_text),
    }

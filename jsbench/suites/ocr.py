"""OCR text rendering: prompts with quoted text, scored by a real OCR engine with MARIO-Eval's metrics.

Prompts are the text world's own seeded set (`make_text_prompts(seed=0, n=160)`, a fixed hashed split:
40 test, 120 train) or a UTF-8 file of prompts, one per line (`prompts_file=`; double quotes or MARIO's
single quotes). The task of an item is how many words it quotes (`one_word`, `two_words`, `many_words`).

Two protocols read an image (`protocol=`, the CLI's --ocr-protocol; docs/ocr-protocols.md):
- `mario` (the default): TextDiffuser's eval/ocr_eval.py to the letter (`jsbench.scoring.mario`): targets
  only inside ASCII single quotes (the text world's prompts quote that way), each detection one token, blank
  ones counted; accuracy (the headline), precision, recall.
- `words`: jsbench's earlier reading (`jsbench.scoring.text.image_metrics`): targets in double or single
  quotes, read text split into words; MARIO-Eval's accuracy, precision and recall on those, plus
  word_accuracy (its headline), ned and ocr_reward.
The protocol is part of every record's provenance (`protocol`): a section scored under another is another
section, and `compare --check` never pairs two.

Aggregates as MARIO-Eval pools them: `overall` is the mean over every
image (not the mean of task means), each task's mean beside it, and `f_measure` from the pooled precision
and recall (per task from that task's), its standard error by the delta method. Every standard error is
clustered by prompt (jsbench.stats.cluster_mean: a prompt's images share its difficulty), the pooled
`overall` and F's delta method too (the cluster-robust SE of each image's linearised F); under `mario`, F has
ocr_eval.py's 1e-8 in its denominator. Neither the engine nor the prompt set is MARIO-Eval's
(MaskTextSpotterV3; six subsets), so absolute values are not the paper's: every record names the engine
and the prompts' sha256.

A backbone that cannot draw text (an embedded world without the text world: detail, scenes-dit) is
refused when the suite is built, before any sampling (`require_text_backbone`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from jsbench import JsbenchError
from jsbench.rewards.ocr import require_text_backbone
from jsbench.rewards.ocr_engines import default_engine, load_engine, read_detections
from jsbench.scoring.mario import mario_f_measure, mario_image_metrics
from jsbench.scoring.text import f_measure, image_metrics, target_words
from jsbench.stats import cluster_mean
from jsbench.suites import OCR_PROTOCOLS, register_suite
from jsbench.suites.base import EvalItem, Suite, TaskMetric, aggregate_by_task

SUITE_PROMPTS = 160
SUITE_SEED = 0
TASKS = ("one_word", "two_words", "many_words")
# MARIO-Eval's own reading: the text world's prompts quote MARIO's way (single quotes), so it finds every
# target; `words` is jsbench's earlier reading, kept by name (docs/ocr-protocols.md)
DEFAULT_OCR_PROTOCOL = "mario"
# what each protocol ranks by and shows beside the leaderboard (`jsbench.report.metric_tables`), under MARIO's names
PRIMARY_METRICS = {"words": "word_accuracy", "mario": "accuracy"}
FURTHER_METRICS = {"words": ("accuracy", "precision", "recall", "f_measure", "ned", "word_accuracy"),
                   "mario": ("accuracy", "precision", "recall", "f_measure")}


def check_ocr_protocol(protocol: str) -> str:
    """`protocol` if it is one of OCR_PROTOCOLS, else one line naming them."""
    if protocol not in OCR_PROTOCOLS:
        raise JsbenchError(f"unknown OCR protocol {protocol!r}: use {' or '.join(OCR_PROTOCOLS)}")
    return protocol


def task_of(prompt: str) -> str:
    n = len(target_words(prompt))
    return TASKS[min(n, 3) - 1]


class OcrSuite(Suite):
    name = "ocr"
    # the default protocol's; an instance's follow its `protocol=`
    primary_metric = PRIMARY_METRICS[DEFAULT_OCR_PROTOCOL]
    leaderboard_metrics = FURTHER_METRICS[DEFAULT_OCR_PROTOCOL]
    protocol_seeds = 4  # MARIO-Eval (TextDiffuser's protocol) samples 4 images per prompt
    overall_rule = "overall = every image pooled, as MARIO-Eval pools"
    # a committed section from before the suite recorded its protocol was scored by jsbench's reading
    unrecorded_provenance = {"protocol": "words"}
    # every further metric of either protocol: a page keeps another protocol's sections beside this run's
    all_leaderboard_metrics = tuple(dict.fromkeys(m for p in OCR_PROTOCOLS for m in FURTHER_METRICS[p]))

    def __init__(self, backbone=None, engine: str | None = None, prompts_file: str | None = None, protocol: str | None = None,
                 **engine_options):
        from jsbench.world.text import load_text_prompts, make_text_prompts, parse_text_prompt

        self.protocol = check_ocr_protocol(protocol or DEFAULT_OCR_PROTOCOL)
        self.primary_metric = PRIMARY_METRICS[self.protocol]
        self.leaderboard_metrics = FURTHER_METRICS[self.protocol]
        if backbone is not None:
            require_text_backbone(backbone, "the ocr suite")
        self.engine_name = engine or default_engine()
        self._engine_options = engine_options
        self._engine = None
        self._prompts_file = prompts_file
        if prompts_file is not None:
            self._prompts = load_text_prompts(prompts_file)
        else:
            self._prompts = make_text_prompts(SUITE_SEED, SUITE_PROMPTS)
        self._meta = {}
        for p in self._prompts:
            spec = parse_text_prompt(p)
            self._meta[p] = {"targets": list(spec.words), "carrier": spec.carrier}

    @classmethod
    def preflight(cls, backbone=None, prompts_file: str | None = None, protocol: str | None = None) -> None:
        """What `jsbench.suites.preflight` runs before any weights load: a backbone (or its class) that draws no
        text, or a line of `prompts_file` the text world cannot draw, is refused in one line."""
        if backbone is not None:
            require_text_backbone(backbone, "the ocr suite")
        if prompts_file is not None:
            from jsbench.world.text import load_text_prompts

            load_text_prompts(prompts_file)

    @property
    def leaderboard_about(self) -> str:
        """What the further-metrics section says of its numbers: the prompts, and why they are not the paper's."""
        prompts = f"the prompts of {self._prompts_file}" if self._prompts_file else (
            f"the text world's held-out prompts (make_text_prompts seed {SUITE_SEED}, {SUITE_PROMPTS} prompts, every 4th for test)")
        if self.protocol == "mario":
            reading = ("read as ocr_eval.py reads them (protocol `mario`: targets in ASCII single quotes, each detection "
                       "one token, blank ones counted)")
        else:
            reading = ("read word by word (protocol `words`: targets in double or single quotes, read text split into "
                       "words, blank detections dropped)")
        return (f"MARIO-Eval's metrics (TextDiffuser's eval/ocr_eval.py), {reading}: accuracy (sorted read tokens "
                f"joined equal the targets'), precision, recall and F from the precision and recall pooled over every "
                f"image; `overall` pools every image, each task's mean beside it. On {prompts}, read by the OCR engine "
                f"each section names: neither is MARIO-Eval's (MaskTextSpotterV3, six subsets), so the values are not "
                f"the paper's.")

    def provenance(self) -> dict:
        """What read the images and by which rules (recorded with every result, beside the prompts' sha256)."""
        return {"ocr_engine": self.engine_name, "protocol": self.protocol}

    @property
    def engine(self):
        """The OCR engine, loaded on first use (listing items never needs it)."""
        if self._engine is None:
            self._engine = load_engine(self.engine_name, **self._engine_options)
        return self._engine

    def reading_memo(self):
        """The engine's identity and memo, for an engine that declares its identity (rapidocr); else None."""
        identity = getattr(self.engine, "identity", None)
        return (identity(), self.engine.memo) if callable(identity) else None

    def items(self, split: str = "test") -> list[EvalItem]:
        from jsbench.world.text import split_text_prompts

        return [EvalItem(p, task_of(p), self._meta[p]) for p in split_text_prompts(self._prompts, split)]

    def score(self, images: torch.Tensor, items: Sequence[EvalItem]) -> list[dict[str, float]]:
        if images.shape[0] != len(items):
            raise ValueError(f"{images.shape[0]} images for {len(items)} items")
        if self.protocol == "mario":
            return [mario_image_metrics(lines, it.prompt) for lines, it in zip(read_detections(self.engine, images), items)]
        texts = self.engine.read(images)
        return [image_metrics(text, it.prompt) for text, it in zip(texts, items)]

    def aggregate(self, scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
        per_task = [m for m in aggregate_by_task(scores, items) if m.task != "overall"]
        f_of = mario_f_measure if self.protocol == "mario" else f_measure
        metrics = per_task + pooled_metrics(scores, items) + f_measure_metrics(scores, items, f_of)
        order = {t: i for i, t in enumerate(TASKS)}
        return sorted(metrics, key=lambda m: (m.metric, order.get(m.task, len(order))))


def pooled_metrics(scores: Sequence[dict[str, float]], items: Sequence[EvalItem]) -> list[TaskMetric]:
    """`overall` as MARIO-Eval pools it: each metric's mean over every image, whatever its task, with its
    standard error clustered by prompt (the images of a prompt are not independent draws)."""
    out = []
    n_prompts = len({it.prompt for it in items})
    for metric in dict.fromkeys(k for s in scores for k in s):
        pairs = [(s[metric], it.prompt) for s, it in zip(scores, items) if metric in s]
        est = cluster_mean([v for v, _ in pairs], [p for _, p in pairs])
        out.append(TaskMetric("overall", metric, est.value, est.stderr, est.n, n_prompts, est.df))
    return out


def _f_gradient(p: float, r: float) -> np.ndarray:
    if p + r <= 0:
        return np.zeros(2)
    return np.array([2.0 * r * r, 2.0 * p * p]) / (p + r) ** 2


def _f_of(group: Sequence[tuple[dict[str, float], str]], f_of=f_measure) -> tuple[float, float, int, float]:
    """F of the mean precision and recall of (scores, prompt) pairs, its delta-method SE clustered by prompt
    (the CR1 SE of grad . (p_i, r_i); with one image per prompt the i.i.d. grad' cov / n grad) and df."""
    rows = [((s["precision"], s["recall"]), prompt) for s, prompt in group if "precision" in s]
    if not rows:
        return float("nan"), float("nan"), 0, float("nan")
    pr = np.array([x for x, _ in rows], dtype=np.float64)
    p, r = pr.mean(0)
    n = len(pr)
    if n < 2:
        return float(f_of(p, r)), float("nan"), n, float("nan")
    linear = (pr @ _f_gradient(p, r)).tolist()  # each image's first-order share of F
    est = cluster_mean(linear, [prompt for _, prompt in rows])
    return float(f_of(p, r)), est.stderr, n, est.df


def f_measure_metrics(scores: Sequence[dict[str, float]], items: Sequence[EvalItem], f_of=f_measure) -> list[TaskMetric]:
    """MARIO's F-measure, `f_of` (2PR / (P + R); ocr_eval.py's own adds 1e-8 below) of the averaged precision
    and recall: per task, and `overall` from the precision and recall pooled over every image, each with a
    delta-method standard error from the per-image precision and recall, clustered by prompt."""
    out: list[TaskMetric] = []
    groups = {task: [(s, it) for s, it in zip(scores, items) if it.task == task] for task in dict.fromkeys(it.task for it in items)}
    groups["overall"] = list(zip(scores, items))
    for task, rows in groups.items():
        value, se, n, df = _f_of([(s, it.prompt) for s, it in rows], f_of)
        if n:
            out.append(TaskMetric(task, "f_measure", value, se, n, len({it.prompt for _, it in rows}), df))
    return out


@register_suite("ocr")
def _suite(backbone=None, **options) -> OcrSuite:
    return OcrSuite(backbone, **options)

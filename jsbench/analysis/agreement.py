"""Scorer agreement: the same images scored by several scorers (OCR engines, GenEval detectors).

A leaderboard row's number depends on the scorer as well as on the schedule. Here every row (a schedule)
samples its images once; each scorer (a suite built with another OCR engine or detector) scores those
identical images; and for a binary per-image metric (OCR `word_accuracy`, MARIO `accuracy`, GenEval
`correct`) each pair of scorers gets:
- per-image agreement: the share of images both scorers give the same verdict;
- Cohen's kappa: that agreement corrected for the agreement their marginal rates give by chance;
- whether the ranking of rows changes: some two rows that one scorer strictly orders one way and the other
  strictly the other way (a tie under either scorer is no change), and Kendall's tau between the two
  scorings (1: the same order; tied pairs count as neither concordant nor discordant).

`sample_rows` draws the images, `score_rows` scores them with each scorer, `agreement` builds the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Mapping, Sequence

import torch

from jsbench import JsbenchError

__all__ = ["cohens_kappa", "kendall_tau", "discordant_pairs", "PairAgreement", "AgreementTable", "agreement", "sample_rows", "score_rows"]


def cohens_kappa(a: Sequence[float], b: Sequence[float]) -> float:
    """Cohen's kappa of two raters' labels on the same items: (p_o - p_e) / (1 - p_e), p_o the observed
    agreement and p_e the agreement expected from each rater's label frequencies. 1 when both give one
    and the same label everywhere (nothing to disagree on); nan for no items."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return float("nan")
    observed = sum(x == y for x, y in zip(a, b)) / n
    labels = set(a) | set(b)
    expected = sum((sum(x == c for x in a) / n) * (sum(y == c for y in b) / n) for c in labels)
    if expected >= 1.0:
        return 1.0 if observed >= 1.0 else 0.0
    return (observed - expected) / (1.0 - expected)


def discordant_pairs(x: Sequence[float], y: Sequence[float]) -> int:
    """How many pairs of rows x orders strictly one way and y strictly the other."""
    return sum((x[i] - x[j]) * (y[i] - y[j]) < 0 for i, j in combinations(range(len(x)), 2))


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-a of two scorings of the same rows: (concordant - discordant) / pairs; a pair tied
    under either scoring counts as neither. nan with fewer than two rows."""
    n = len(x)
    if n != len(y):
        raise ValueError(f"{n} values against {len(y)}")
    pairs = n * (n - 1) // 2
    if pairs == 0:
        return float("nan")
    score = 0
    for i, j in combinations(range(n), 2):
        s = (x[i] - x[j]) * (y[i] - y[j])
        score += (s > 0) - (s < 0)
    return score / pairs


@dataclass(frozen=True)
class PairAgreement:
    a: str
    b: str
    n_images: int
    agreement: float  # share of images with the same verdict
    kappa: float
    kendall_tau: float  # of the rows' means under a and under b
    ranking_changed: bool  # some two rows are strictly ordered one way by a, the other way by b


@dataclass
class AgreementTable:
    metric: str
    rows: list[str]
    means: dict[str, dict[str, float]]  # scorer -> row -> mean of the metric over the row's images
    pairs: list[PairAgreement] = field(default_factory=list)

    def order(self, scorer: str) -> list[str]:
        """The rows best first under `scorer` (ties by row name)."""
        return sorted(self.rows, key=lambda r: (-self.means[scorer][r], r))

    def markdown(self) -> str:
        """Two tables: each row's mean under each scorer, then each pair's agreement."""
        scorers = list(self.means)
        out = [f"| row | {' | '.join(scorers)} |", "|---|" + "---:|" * len(scorers)]
        out += [f"| {r} | " + " | ".join(f"{self.means[s][r]:.3f}" for s in scorers) + " |" for r in self.rows]
        out += ["", f"| scorers | images | agreement | Cohen's κ | Kendall τ of rows | ranking changes |", "|---|---:|---:|---:|---:|---|"]
        for p in self.pairs:
            tau = "n/a" if math.isnan(p.kendall_tau) else f"{p.kendall_tau:+.2f}"
            out.append(f"| {p.a} vs {p.b} | {p.n_images} | {p.agreement:.3f} | {p.kappa:+.3f} | {tau} | "
                       f"{'yes' if p.ranking_changed else 'no'} |")
        return "\n".join(out)

    def as_dict(self) -> dict:
        return {"metric": self.metric, "rows": self.rows, "means": self.means,
                "order": {s: self.order(s) for s in self.means}, "pairs": [vars(p) for p in self.pairs]}


def agreement(verdicts: Mapping[str, Mapping[str, Sequence[float]]], metric: str) -> AgreementTable:
    """`verdicts[scorer][row]`: the per-image values of a binary metric, images in the same order for every
    scorer -> means per scorer and row, and per scorer pair the per-image agreement (all rows' images
    pooled), Cohen's kappa and whether the rows' ranking changes."""
    scorers = list(verdicts)
    if len(scorers) < 2:
        raise JsbenchError(f"scorer agreement needs two scorers or more, got {len(scorers)}")
    rows = list(verdicts[scorers[0]])
    for s in scorers:
        if list(verdicts[s]) != rows or any(len(verdicts[s][r]) != len(verdicts[scorers[0]][r]) for r in rows):
            raise JsbenchError(f"scorer {s!r} did not score the same rows and images as {scorers[0]!r}")
    means = {s: {r: sum(verdicts[s][r]) / len(verdicts[s][r]) for r in rows} for s in scorers}
    table = AgreementTable(metric, rows, means)
    for a, b in combinations(scorers, 2):
        va = [v for r in rows for v in verdicts[a][r]]
        vb = [v for r in rows for v in verdicts[b][r]]
        same = sum(x == y for x, y in zip(va, vb)) / len(va) if va else float("nan")
        ma, mb = [means[a][r] for r in rows], [means[b][r] for r in rows]
        table.pairs.append(PairAgreement(a, b, len(va), same, cohens_kappa(va, vb), kendall_tau(ma, mb), discordant_pairs(ma, mb) > 0))
    return table


def sample_rows(backbone, sources: Mapping[str, object], items: Sequence, seeds: Sequence[int], batch_size: int | None = None) -> dict[str, torch.Tensor]:
    """Each schedule source's images for every (item, seed), items outer: {row label: [N, 3, H, W]}."""
    from jsbench.backbones.base import eval_batch_size
    from jsbench.evaluation.evaluate import encode_rows, sample_source

    rows = [(it, s) for it in items for s in seeds]
    size = batch_size or eval_batch_size(backbone)
    out = {}
    for label, source in sources.items():
        chunks = []
        for start in range(0, len(rows), size):
            cond, x_T = encode_rows(backbone, rows[start : start + size])
            chunks.append(sample_source(backbone, source, x_T, cond).cpu())
        out[label] = torch.cat(chunks)
    return out


def score_rows(scorers: Mapping[str, object], images: Mapping[str, torch.Tensor], items: Sequence, seeds: Sequence[int],
               metric: str) -> dict[str, dict[str, list[float]]]:
    """`verdicts[scorer][row]`: each scorer (a suite) scores every row's images (`sample_rows`' order)."""
    row_items = [it for it in items for _ in seeds]
    out: dict[str, dict[str, list[float]]] = {}
    for name, suite in scorers.items():
        out[name] = {}
        for label, batch in images.items():
            scores = suite.score(batch, row_items)
            if any(metric not in s for s in scores):
                raise JsbenchError(f"scorer {name!r} gives no {metric!r} per image")
            out[name][label] = [float(s[metric]) for s in scores]
    return out

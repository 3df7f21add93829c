#!/usr/bin/env python
"""Scorer agreement: the same images scored by each OCR engine (or GenEval detector) available.

Every schedule row samples its images once (the suite's first --prompts test prompts x --seeds seeds);
each scorer scores those identical images; the table gives each row's mean per scorer and, per pair of
scorers, the per-image agreement, Cohen's kappa and whether the rows' ranking changes
(`jsbench.analysis.agreement`). A scorer that cannot load here is listed as unavailable with the reason.
Prints the tables and one JSON line; `--write` writes bench/results/scorer_agreement-<suite>.json,
`--out PATH` elsewhere.

    python scripts/scorer_agreement.py                                   # ocr: rapidocr, tesseract, easyocr
    python scripts/scorer_agreement.py --suite geneval --backbone sdxl --scorers mask2former owl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench import JsbenchError  # noqa: E402
from jsbench.analysis.agreement import agreement, sample_rows, score_rows  # noqa: E402
from jsbench.io import write_text_atomic  # noqa: E402

DEFAULT_SCORERS = {"ocr": ["rapidocr", "tesseract", "easyocr"], "geneval": ["mask2former", "owl"]}


def build_scorer(suite: str, backbone, name: str):
    """The suite scored by OCR engine / detector `name`, its model loaded now (JsbenchError if it cannot)."""
    from jsbench.suites import load_suite

    if suite == "ocr":
        scorer = load_suite("ocr", backbone, engine=name)
        scorer.engine  # noqa: B018 - load the engine now: an unavailable one is reported, not crashed on
        return scorer
    if suite == "geneval":
        from jsbench.rewards.detectors import load_detector

        return load_suite("geneval", backbone, detector=load_detector(name))
    raise JsbenchError(f"scorer agreement covers the ocr and geneval suites, not {suite!r}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="ocr", choices=sorted(DEFAULT_SCORERS))
    parser.add_argument("--scorers", nargs="+", default=None, help="OCR engines or detector specs")
    parser.add_argument("--backbone", default="analytic")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--schedules", nargs="+", default=["default", "uniform", "shift:3", "ceiling"])
    parser.add_argument("--prompts", type=int, default=20, help="first N test prompts")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--metric", default=None, help="binary per-image metric (default: the suite's)")
    parser.add_argument("--write", action="store_true", help="write bench/results/scorer_agreement-<suite>.json")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.prompts < 1 or args.seeds < 1:
        parser.error("--prompts and --seeds must be >= 1")
    from jsbench.backbones import load_backbone
    from jsbench.evaluation.evaluate import EVAL_SEED_BASE, resolve_schedule

    backbone = load_backbone(args.backbone)
    scorers, unavailable = {}, {}
    for name in args.scorers or DEFAULT_SCORERS[args.suite]:
        try:
            scorers[name] = build_scorer(args.suite, backbone, name)
        except JsbenchError as err:
            unavailable[name] = str(err)
    if len(scorers) < 2:
        raise SystemExit(f"error: scorer agreement needs two scorers that load here; unavailable: {unavailable}")
    items = next(iter(scorers.values())).items("test")[: args.prompts]
    seeds = list(range(EVAL_SEED_BASE, EVAL_SEED_BASE + args.seeds))
    sources = {}
    for spec in args.schedules:
        source = resolve_schedule(spec, backbone, args.steps, suite=next(iter(scorers.values())))
        sources[source.label] = source
    start = time.perf_counter()
    images = sample_rows(backbone, sources, items, seeds)
    metric = args.metric or next(iter(scorers.values())).primary_metric  # ocr: MARIO's accuracy; geneval: correct
    verdicts = score_rows(scorers, images, items, seeds, metric)
    table = agreement(verdicts, metric)
    result = {"suite": args.suite, "backbone": args.backbone, "steps": args.steps, "prompts": len(items),
              "seeds": args.seeds, "scorers": list(scorers), "unavailable": unavailable,
              "seconds": round(time.perf_counter() - start, 1), **table.as_dict()}
    print(table.markdown(), file=sys.stderr)
    line = json.dumps(result)
    print(line)
    out = args.out or (ROOT / "bench" / "results" / f"scorer_agreement-{args.suite}.json" if args.write else None)
    if out is not None:
        write_text_atomic(out, line + "\n")
    return result


if __name__ == "__main__":
    main()

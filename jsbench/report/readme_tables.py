"""The result tables of README.md and docs/*.md, rendered from the committed leaderboard CSVs
(scripts/readme_tables.py).

A table sits in a page between `<!-- table:NAME -->` and `<!-- /table:NAME -->`, each name in one place
across the pages (`table_pages`): the `headline` block in the README, the worlds' in docs/results.md.

A world's table: one line per method (in the leaderboard's order), its overall score at each step budget
(± one SE clustered by prompt; a learned row's SE counts its training seeds, and † marks a budget where its
held-out score had not settled), its paired Δ vs default (one budget) and vs the learned global row, with
the 95 % Student-t interval of a learned row's Δ vs global. The headline table: every section's headline
contrasts (jsbench.report.contrasts) with their interval and the seeds that would resolve 0.02, and what the
interval says in words. The peers table: the one-shot, step-by-step and distilled rows beside global and
oss-image in each section that has a peer row, and their contrasts (docs/peer-methods.md).
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path

from jsbench.report.contrasts import contrasts_path, read_contrasts
from jsbench.report.power import RESOLVE_DIFFERENCE

__all__ = ["WORLDS", "world_table", "headline_table", "peers_table", "weights_table", "baselines_list", "readme_tables", "fill_blocks", "block_names", "table_pages",
           "block_problems", "fill_pages"]

# block name -> (suite, backbone)
WORLDS = {"analytic": ("geneval", "analytic"), "scenes-dit": ("geneval", "scenes-dit"), "detail": ("geneval", "detail"), "ocr": ("ocr", "analytic")}
MINUS = "−"
BLOCK = re.compile(r"<!-- table:([\w-]+) -->\n.*?<!-- /table:\1 -->", re.S)  # a table block, its name
OPENING = re.compile(r"<!-- table:([\w-]+) -->")


def _num(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def _signed(v: float, digits: int = 3) -> str:
    return f"{v:+.{digits}f}".replace("-", MINUS)


def _plain(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}f}".replace("-", MINUS)


def _cell(value, se, signed=False) -> str:
    if value is None:
        return ""
    text = _signed(value) if signed else _plain(value)
    return text + (f" ± {se:.3f}" if se is not None else "")


def _interval(lo, hi) -> str:
    return f" [{_signed(lo)}, {_signed(hi)}]" if lo is not None and hi is not None else ""


def _head(header: list[str]) -> list[str]:
    """A Markdown table's heading and rule lines."""
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]


def _score(row: dict | None) -> str:
    """A leaderboard row's overall score ± SE, † where its held-out score had not settled; – for no row."""
    if not row:
        return "–"
    return _cell(_num(row["value"]), _num(row["stderr"])) + (" †" if row.get("converged") == "false" else "")


def _overall_lines(path: Path, backbone: str) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["task"] == "overall" and r["backbone"] == backbone]


def world_table(leaderboards: Path, suite: str, backbone: str) -> str:
    lines = _overall_lines(Path(leaderboards) / f"{suite}.csv", backbone)
    if not lines:
        raise ValueError(f"leaderboards/{suite}.csv has no {backbone} rows")
    budgets = sorted({int(r["budget"] or r["steps"]) for r in lines})
    methods = list(dict.fromkeys(r["method"] for r in lines))
    at = {(r["method"], int(r["budget"] or r["steps"])): r for r in lines}
    header = ["method", *(f"{n} steps" for n in budgets)]
    if len(budgets) == 1:
        header.append("Δ vs default")
    header += [f"Δ vs global ({n} steps)" if len(budgets) > 1 else "Δ vs global" for n in budgets]
    out = _head(header)
    seeds = set()
    for m in methods:
        cells = [m]
        for n in budgets:
            r = at.get((m, n))
            cells.append(_score(r))
            if r and r.get("train_seeds"):
                seeds.add(int(r["train_seeds"]))
        if len(budgets) == 1:
            r = at.get((m, budgets[0]))
            cells.append("–" if m == "default" else _cell(_num(r["delta"]), _num(r["delta_stderr"]), signed=True) if r and r["delta"] else "")
        for n in budgets:
            r = at.get((m, n))
            if not r or r.get("delta_global") in (None, ""):
                cells.append("–" if m == "global" else "")
                continue
            learned = bool(r.get("train_seeds"))
            cells.append(_cell(_num(r["delta_global"]), _num(r["delta_global_stderr"]), signed=True)
                         + (_interval(_num(r.get("delta_global_ci_low")), _num(r.get("delta_global_ci_high"))) if learned else ""))
        out.append("| " + " | ".join(cells) + " |")
    seeds_text = " or ".join(str(s) for s in sorted(seeds)) or "–"
    out += ["", f"± one SE clustered by prompt; learned rows are the mean of {seeds_text} training seeds, their SE counting",
            "them, and [lo, hi] is the 95 % Student-t interval of a learned row's Δ at its Satterthwaite df."]
    if any(r.get("converged") == "false" for r in lines):
        out.append("† its held-out score, averaged over the seeds, had not settled (jsbench/policy/convergence.py).")
    return "\n".join(out) + "\n"


def verdict(row: dict) -> str:
    """What a contrast's interval says, in words that it carries."""
    a, b = row["a"], row["b"]
    if row["ci_low"] > 0:
        return f"{a} above {b}"
    if row["ci_high"] < 0:
        return f"{b} above {a}"
    return "not resolved"


def headline_table(leaderboards: Path) -> str:
    rows = []
    for suite in ("geneval", "ocr"):
        rows += [(suite, r) for r in read_contrasts(contrasts_path(leaderboards, suite))]
    out = _head(["suite", "world", "steps", "contrast", "Δ ± SE", "95 % t interval", "SE unpaired", "seeds",
                 f"seeds for {RESOLVE_DIFFERENCE}", "says"])
    for suite, r in rows:
        need = str(r["seeds_to_resolve"]) if r["seeds_to_resolve"] is not None else "– (images)"
        out.append(f"| {suite} | {r['backbone']} | {r['steps']} | {r['contrast']} | {_signed(r['delta'])} ± {r['stderr']:.3f} | "
                   f"[{_signed(r['ci_low'])}, {_signed(r['ci_high'])}] | {r['stderr_unpaired_seeds']:.3f} | {r['train_seeds']} | {need} | {verdict(r)} |")
    out += ["", "Δ paired on the same images and by training seed (against the teacher match, oss-image, one schedule",
            "source: on the images, the learned row's seeds its only seed term); the interval is Student t at the",
            "Satterthwaite df of the image and seed terms; SE unpaired: the SE without pairing the seeds (seed s of",
            "every row draws the same contexts and training noise, so pairing them removes what they share); seeds for "
            f"{RESOLVE_DIFFERENCE}: training",
            f"seeds per row for 80 % power against a difference of {RESOLVE_DIFFERENCE} at this spread (– (images): the image",
            "part alone is too wide). Made from leaderboards/*.contrasts.csv."]
    return "\n".join(out) + "\n"


#: the peer-method tables' columns: (leaderboard method, heading) and (contrast name, heading)
PEER_ROWS = (("js", "js (one-shot)"), ("tpdm (js)", "tpdm (step-by-step)"), ("indis", "indis (distilled)"), ("global", "global"),
             ("oss-image", "oss-image"))
PEER_CONTRASTS = ("step-by-step − global", "one-shot − step-by-step", "distilled − global", "reward − distilled")
PEER_TEACHER_CONTRASTS = ("one-shot − teacher match", "step-by-step − teacher match", "distilled − teacher match")


def peers_table(leaderboards: Path) -> str:
    """The peer methods beside the one-shot policy, per GenEval section with a tpdm or indis row: each row's
    overall score (†: not settled), then their headline contrasts with the 95 % t interval, among themselves
    and against global, then each against the per-image teacher match (oss-image)."""
    with open(Path(leaderboards) / "geneval.csv", newline="") as f:
        lines = [r for r in csv.DictReader(f) if r["task"] == "overall"]
    at = {(r["backbone"], int(r["budget"] or r["steps"]), r["method"]): r for r in lines}
    sections = list(dict.fromkeys((r["backbone"], int(r["budget"] or r["steps"])) for r in lines
                                  if r["method"] in ("tpdm (js)", "indis")))
    out = _head(["world", "steps", *(h for _, h in PEER_ROWS)])
    for world, n in sections:
        cells = [world, str(n), *(_score(at.get((world, n, method))) for method, _ in PEER_ROWS)]
        out.append("| " + " | ".join(cells) + " |")
    contrasts = {(r["backbone"], r["steps"], r["contrast"]): r for r in read_contrasts(contrasts_path(leaderboards, "geneval"))}
    for names in (PEER_CONTRASTS, PEER_TEACHER_CONTRASTS):
        out += ["", *_head(["world", "steps", *names])]
        for world, n in sections:
            cells = [world, str(n)]
            for name in names:
                r = contrasts.get((world, n, name))
                cells.append(f"{_signed(r['delta'])}{_interval(r['ci_low'], r['ci_high'])}" if r else "–")
            out.append("| " + " | ".join(cells) + " |")
    out += ["", "± one SE clustered by prompt, learned rows' counting their training seeds (†: held-out score not settled);",
            "contrasts paired on the same images and by training seed (against the teacher match, oss-image, one",
            "schedule source: paired on the images, the learned row's seeds its only seed term), [lo, hi] their 95 %",
            "Student-t interval at the Satterthwaite df. Made from leaderboards/geneval.csv and geneval.contrasts.csv."]
    return "\n".join(out) + "\n"


def _gib(entries: int, bytes_per_entry: int = 2) -> str:
    return f"{entries * bytes_per_entry / 2**30:.2f}"


@functools.cache  # the configs are code: one count a process (it builds every full-size pipeline on meta)
def weights_table() -> str:
    """The real backbones' weights in bf16, GiB, per component, from their full-size configs counted on the meta
    device (`jsbench.backbones.full_size.component_sizes`: parameters and floating-point buffers), and the two
    pipelines `compare --distilled flux-schnell` holds (the text encoders and VAE shared, one more transformer)."""
    from jsbench.backbones.full_size import FULL_SIZE, component_sizes

    sizes = {kind: component_sizes(kind) for kind in FULL_SIZE}
    out = ["| backbone | denoiser | text encoders | VAE | all |", "|---|---|---|---|---|"]

    def row(name: str, denoiser: int, encoders: dict, vae: int) -> str:
        text = sum(encoders.values())
        each = ", ".join(f"{n} {_gib(v)}" for n, v in encoders.items())
        return f"| {name} | {_gib(denoiser)} | {_gib(text)} ({each}) | {_gib(vae)} | {_gib(denoiser + text + vae)} |"

    for kind, c in sizes.items():
        out.append(row(kind, c["denoiser"], c["text_encoders"], c["vae"]))
    if {"flux-dev", "flux-schnell"} <= set(sizes):
        dev, schnell = sizes["flux-dev"], sizes["flux-schnell"]
        out.append(row("flux-dev with `--distilled flux-schnell`", dev["denoiser"] + schnell["denoiser"], dev["text_encoders"], dev["vae"]))
    out += ["", "GiB of bf16 weights (2 bytes an entry: parameters and floating-point buffers, so SD3.5's positional",
            "table counts), from each family's published config built on the meta device (`jsbench policies size",
            "--backbone B --format json`, key `backbone_params`); sd35 is SD3.5 Medium."]
    return "\n".join(out) + "\n"


def baselines_list() -> str:
    """The REINFORCE baselines `train --baseline` takes, from their records (`jsbench.baselines.BASELINES`), in
    the lab's order: name, what it is, the smallest K and B it runs on."""
    from jsbench.baselines import BASELINES

    out = []
    for b in sorted(BASELINES.values(), key=lambda b: b.lab_order):
        needs = [f"K >= {b.min_samples}" if b.min_samples > 1 else "", f"B >= {b.min_contexts}" if b.min_contexts > 1 else ""]
        needs = ", ".join(n for n in needs if n)
        out.append(f"- `{b.name}`: {b.description}" + (f" ({needs})" if needs else "") + ".")
    return "\n".join(out) + "\n"


def readme_tables(leaderboards: Path) -> dict[str, str]:
    tables = {name: world_table(leaderboards, suite, backbone) for name, (suite, backbone) in WORLDS.items()}
    tables["headline"] = headline_table(leaderboards)
    tables["peers"] = peers_table(leaderboards)
    tables["weights"] = weights_table()
    tables["baselines"] = baselines_list()
    return tables


def fill_blocks(text: str, tables: dict[str, str]) -> str:
    """`text` with each `<!-- table:NAME -->...<!-- /table:NAME -->` block's body replaced by its table; a
    block with no table is left as it is, a table with no block is not placed."""
    def body(m: re.Match) -> str:
        name = m.group(1)
        return f"<!-- table:{name} -->\n{tables[name]}<!-- /table:{name} -->" if name in tables else m.group(0)

    return BLOCK.sub(body, text)


def block_names(text: str) -> list[str]:
    """The names of `text`'s table blocks, in order (a name twice is listed twice)."""
    return [m.group(1) for m in BLOCK.finditer(text)]


def table_pages(root: Path) -> list[Path]:
    """The pages whose table blocks are rewritten and checked: README.md and every docs/*.md."""
    root = Path(root)
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def block_problems(pages: dict[Path, str], tables: dict[str, str]) -> list[str]:
    """What keeps the pages' blocks from being the tables, one line each: an opening marker not closed, a
    block name placed more than once (across every page), a block with no table, a table placed in no page."""
    where: dict[str, list[Path]] = {}
    problems = []
    for path, text in pages.items():
        names = block_names(text)
        for name in names:
            where.setdefault(name, []).append(path)
        problems += [f"{path}: <!-- table:{name} --> has no <!-- /table:{name} --> after it"
                     for name in sorted(set(OPENING.findall(text))) if OPENING.findall(text).count(name) > names.count(name)]
    problems += [f"table:{name} is placed {len(paths)} times ({', '.join(sorted({str(p) for p in paths}))}): keep one"
                for name, paths in where.items() if len(paths) > 1]
    problems += [f"table:{name} ({where[name][0]}) has no table: one of {', '.join(tables)}" for name in where if name not in tables]
    problems += [f"table:{name} is placed in no page" for name in tables if name not in where]
    return problems


def fill_pages(pages: dict[Path, str], tables: dict[str, str]) -> dict[Path, str]:
    """Each page's text with its blocks filled (`fill_blocks`); a page without blocks comes back as it is."""
    return {path: fill_blocks(text, tables) for path, text in pages.items()}


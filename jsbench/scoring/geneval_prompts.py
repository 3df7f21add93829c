"""GenEval prompts for real backbones: GenEval's own generator, re-implemented, and a loader for its file.

`make_geneval_prompts(43)` is GenEval's prompts/evaluation_metadata.jsonl, byte for byte once
serialised by `metadata_jsonl` (553 lines, sha256 `OFFICIAL_SHA256`). It follows the draw order of
GenEval's prompts/create_prompts.py (Ghosh et al., 2023) on numpy's `default_rng(seed)`:

    single_object  every class once, in the order of one permutation        a photo of a {cls}
    two_object     100 draws of 2 distinct classes                          a photo of a {a} and a {b}
    counting       100 draws: a class, then a count in 2..4                 a photo of {num} {plural(cls)}
                   (include count=num, exclude count=num+1)
    colors         100 draws: a class other than "person", then a colour     a photo of a {color} {cls}
    position       100 draws: 2 distinct classes, then a relation           a photo of a {a} {rel} a {b}
                   (include [b, a at (rel, 0)])
    color_attr     100 draws: 2 distinct classes other than "person", then 2 distinct colours
                                                                            a photo of a {ca} {a} and a {cb} {b}

then drops repeated entries (80 / 99 / 80 / 94 / 100 / 100 remain for seed 43). "a" becomes "an"
before a vowel, and plurals are GenEval's suffix rule ("buses", "persons", "sheeps", "knifes").
Each prompt is a GenEval metadata dict with GenEval's key order (tag, include, exclude?, prompt), the
shape `load_metadata` reads from any `evaluation_metadata.jsonl`.

Training prompts come from the same generator under other seeds (`TRAIN_SEEDS`), minus every prompt
whose scoring rules equal a test entry's (`rules_key`: tag, include and exclude groups, in any
order where order carries no meaning), so a policy never trains on an item it is evaluated on, under
any spelling.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from jsbench import JsbenchError
from jsbench.io import utf8_lines
from jsbench.splits import check_split
from jsbench.scoring.geneval import CLASSES, COLORS, RELATIONS, TASKS

__all__ = [
    "COCO_CLASSES",
    "COLORS",
    "NUMBERS",
    "TASK_SIZES",
    "OFFICIAL_SEED",
    "OFFICIAL_SHA256",
    "TRAIN_SEEDS",
    "plural",
    "make_geneval_prompts",
    "metadata_jsonl",
    "prompt_set_hash",
    "rules_key",
    "load_metadata",
    "validate_entry",
    "split_geneval_prompts",
]

COCO_CLASSES = CLASSES
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
DRAWS_PER_TASK = 100
MAX_COUNT = 4
OFFICIAL_SEED = 43
OFFICIAL_SHA256 = "5c48e0813e812e3c373fa5c8ed07a8f0a483be30272b4427b0559c8048e67c13"
TRAIN_SEEDS: tuple[int, ...] = (0,)
# prompts per task in the official set (seed 43), after repeated draws are dropped
TASK_SIZES: dict[str, int] = {"single_object": 80, "two_object": 99, "counting": 80, "colors": 94, "position": 100, "color_attr": 100}


def plural(name: str) -> str:
    """GenEval's plural: "es" after a final "s", else "s" ("buses", "persons", "sheeps", "knifes")."""
    return name + ("es" if name.endswith("s") else "s")


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def make_geneval_prompts(seed: int = OFFICIAL_SEED, draws: int = DRAWS_PER_TASK) -> list[dict]:
    """GenEval's generator on `default_rng(seed)`: seed 43 is the official 553-prompt benchmark."""
    rng = np.random.default_rng(seed)
    classes, n = CLASSES, len(CLASSES)
    person = classes.index("person")

    def not_person(draw):  # a draw in [0, n-1) moved past "person", as GenEval does it
        return (np.asarray(draw) + 1 + person) % n

    entries: list[dict] = []
    for i in rng.choice(n, size=n, replace=False):
        cls = classes[i]
        entries.append({"tag": "single_object", "include": [{"class": cls, "count": 1}], "prompt": f"a photo of {_a(cls)}"})
    for _ in range(draws):
        a, b = (classes[i] for i in rng.choice(n, size=2, replace=False))
        entries.append(
            {"tag": "two_object", "include": [{"class": a, "count": 1}, {"class": b, "count": 1}], "prompt": f"a photo of {_a(a)} and {_a(b)}"}
        )
    for _ in range(draws):
        cls = classes[rng.choice(n)]
        num = int(rng.integers(2, MAX_COUNT, endpoint=True))
        entries.append(
            {
                "tag": "counting",
                "include": [{"class": cls, "count": num}],
                "exclude": [{"class": cls, "count": num + 1}],
                "prompt": f"a photo of {NUMBERS[num]} {plural(cls)}",
            }
        )
    for _ in range(draws):
        cls = classes[int(not_person(rng.choice(n - 1)))]
        color = COLORS[rng.choice(len(COLORS))]
        entries.append({"tag": "colors", "include": [{"class": cls, "count": 1, "color": color}], "prompt": f"a photo of {_a(color)} {cls}"})
    for _ in range(draws):
        a, b = (classes[i] for i in rng.choice(n, size=2, replace=False))
        rel = RELATIONS[rng.choice(len(RELATIONS))]
        entries.append(
            {
                "tag": "position",
                "include": [{"class": b, "count": 1}, {"class": a, "count": 1, "position": [rel, 0]}],
                "prompt": f"a photo of {_a(a)} {rel} {_a(b)}",
            }
        )
    for _ in range(draws):
        a, b = (classes[int(i)] for i in not_person(rng.choice(n - 1, size=2, replace=False)))
        ca, cb = (COLORS[i] for i in rng.choice(len(COLORS), size=2, replace=False))
        entries.append(
            {
                "tag": "color_attr",
                "include": [{"class": a, "count": 1, "color": ca}, {"class": b, "count": 1, "color": cb}],
                "prompt": f"a photo of {_a(ca)} {a} and {_a(cb)} {b}",
            }
        )
    seen: set[str] = set()
    out = []
    for e in entries:  # GenEval drops an entry equal to an earlier one (all fields)
        key = json.dumps(e, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def metadata_jsonl(entries: Iterable[dict]) -> str:
    """GenEval's serialisation: one `json.dumps` object a line."""
    return "".join(json.dumps(e) + "\n" for e in entries)


def prompt_set_hash(entries: Iterable[dict]) -> str:
    """sha256 of `metadata_jsonl(entries)`: for the official set, the official file's sha256."""
    return hashlib.sha256(metadata_jsonl(entries).encode("utf-8")).hexdigest()


def rules_key(entry: dict) -> str:
    """What an entry's verdict depends on besides the image: tag, include and exclude groups. Groups
    are order-free (GenEval ANDs them) unless a position refers to a group by its index."""
    include = [json.dumps(g, sort_keys=True) for g in entry.get("include", [])]
    if not any("position" in g for g in entry.get("include", [])):
        include.sort()
    exclude = sorted(json.dumps(g, sort_keys=True) for g in entry.get("exclude", []))
    return json.dumps([entry.get("tag"), include, exclude])


def split_geneval_prompts(prompts: Sequence[dict], split: str, train_seeds: Sequence[int] = TRAIN_SEEDS) -> list[dict]:
    """`test` (and `all`): the given prompts, GenEval's benchmark. `train`: the generator under
    `train_seeds`, minus every entry whose rules equal a test entry's, each rule set once."""
    check_split(split)
    if split in ("test", "all"):
        return list(prompts)
    held = {rules_key(p) for p in prompts}
    out = []
    for seed in train_seeds:
        for p in make_geneval_prompts(seed):
            key = rules_key(p)
            if key not in held:
                held.add(key)
                out.append(p)
    return out


def validate_entry(entry, where: str = "entry") -> dict:
    """Check one GenEval metadata dict; a JsbenchError naming `where` and the fault if malformed."""

    def bad(msg: str):
        raise JsbenchError(f"{where}: {msg}")

    if not isinstance(entry, dict):
        bad(f"expected a JSON object, got {type(entry).__name__}")
    for key in ("tag", "prompt"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            bad(f"missing or empty string field {key!r}")
    if entry["tag"] not in TASKS:
        bad(f"unknown tag {entry['tag']!r} (one of {', '.join(TASKS)})")
    include = entry.get("include")
    if not isinstance(include, list) or not include:
        bad("'include' must be a non-empty list")
    for field in ("include", "exclude"):
        groups = entry.get(field, [])
        if not isinstance(groups, list):
            bad(f"{field!r} must be a list")
        for i, req in enumerate(groups):
            if not isinstance(req, dict) or not isinstance(req.get("class"), str):
                bad(f"{field}[{i}] needs a string 'class'")
            count = req.get("count")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                bad(f"{field}[{i}] needs a positive integer 'count'")
            if "color" in req and not isinstance(req["color"], str):
                bad(f"{field}[{i}].color must be a string")
            if "position" in req:
                pos = req["position"]
                if (
                    field != "include"
                    or not isinstance(pos, list)
                    or len(pos) != 2
                    or pos[0] not in RELATIONS
                    or not isinstance(pos[1], int)
                    or not 0 <= pos[1] < i
                ):
                    bad(f"{field}[{i}].position must be [relation, index of an earlier include group]")
    return entry


def load_metadata(path: str | Path, check=None) -> list[dict]:
    """GenEval's `evaluation_metadata.jsonl` (one JSON object a line; blank lines skipped).

    Every fault names the file and line: bytes that are not UTF-8, JSON that does not parse, an entry
    `validate_entry` refuses, or one `check(entry)` refuses (it returns the reason, or None to accept).
    """
    path = Path(path)
    if not path.is_file():
        raise JsbenchError(f"GenEval metadata file {str(path)!r} not found (GenEval's prompts/evaluation_metadata.jsonl)")
    out = []
    for lineno, line in utf8_lines(path.read_bytes(), path):
        where = f"{path}:{lineno}"
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JsbenchError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        validate_entry(entry, where)
        reason = check(entry) if check is not None else None
        if reason:
            raise JsbenchError(f"{where}: {reason}")
        out.append(entry)
    if not out:
        raise JsbenchError(f"GenEval metadata file {str(path)!r} has no entries")
    return out

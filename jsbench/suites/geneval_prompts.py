"""GenEval prompts for real backbones: our own seeded generator, and a loader for the official file.

The generator is written from GenEval's published structure (Ghosh et al., 2023), not copied from its
data: the 80 COCO classes (GenEval's spellings, e.g. "tv remote", "computer keyboard"), ten colours,
counts 2-4, four relations, and 553 prompts in six tasks -- single_object 80, two_object 99, counting
80, colors 94, position 100, color_attr 100 -- with GenEval's templates:

    single_object  a photo of a {cls}
    two_object     a photo of a {cls_a} and a {cls_b}
    counting       a photo of {num} {cls_plural}            include count=num, exclude count=num+1
    colors         a photo of a {color} {cls}
    position       a photo of a {cls_b} {relation} a {cls_a}  include [a, b at (relation, 0)]
    color_attr     a photo of a {color_a} {cls_a} and a {color_b} {cls_b}

("a" becomes "an" before a vowel.) Each prompt is a GenEval metadata dict (tag, prompt, include,
exclude?), the same shape `load_metadata` reads from GenEval's `evaluation_metadata.jsonl`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from jsbench import JsbenchError
from jsbench.rewards.geneval import RELATIONS, TASKS

__all__ = [
    "COCO_CLASSES",
    "COLORS",
    "NUMBERS",
    "TASK_SIZES",
    "plural",
    "make_geneval_prompts",
    "load_metadata",
    "validate_entry",
    "split_geneval_prompts",
]

COCO_CLASSES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "computer mouse", "tv remote",
    "computer keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator",
    "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip
COLORS: tuple[str, ...] = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white")
NUMBERS: dict[int, str] = {2: "two", 3: "three", 4: "four"}
TASK_SIZES: dict[str, int] = {
    "single_object": 80,
    "two_object": 99,
    "counting": 80,
    "colors": 94,
    "position": 100,
    "color_attr": 100,
}
_IRREGULAR = {"person": "people", "sheep": "sheep", "skis": "pairs of skis", "scissors": "pairs of scissors",
              "knife": "knives", "mouse": "mice", "computer mouse": "computer mice", "tv": "tvs"}  # fmt: skip


def plural(name: str) -> str:
    """English plural of a class name ("bus" -> "buses", "person" -> "people", "wine glass" -> "wine glasses")."""
    if name in _IRREGULAR:
        return _IRREGULAR[name]
    if name.endswith(("s", "sh", "ch", "x", "z")):
        return name + "es"
    if name.endswith("y") and name[-2:-1] not in "aeiou":
        return name[:-1] + "ies"
    return name + "s"


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def make_geneval_prompts(seed: int = 0) -> list[dict]:
    """The 553 GenEval-structured prompts for `seed` (seed 0 is the suite's set), in task order."""
    rng = random.Random(seed)
    classes = list(COCO_CLASSES)
    out: list[dict] = []

    def take(tag: str, make):
        seen: set[str] = set()
        while len(seen) < TASK_SIZES[tag]:
            entry = make()
            if entry["prompt"] not in seen:
                seen.add(entry["prompt"])
                out.append({"tag": tag, **entry})

    for cls in classes:
        out.append({"tag": "single_object", "prompt": f"a photo of {_a(cls)}", "include": [{"class": cls, "count": 1}]})

    def two_object():
        a, b = rng.sample(classes, 2)
        return {"prompt": f"a photo of {_a(a)} and {_a(b)}", "include": [{"class": a, "count": 1}, {"class": b, "count": 1}]}

    take("two_object", two_object)
    for cls in classes:
        n = rng.choice(sorted(NUMBERS))
        out.append(
            {
                "tag": "counting",
                "prompt": f"a photo of {NUMBERS[n]} {plural(cls)}",
                "include": [{"class": cls, "count": n}],
                "exclude": [{"class": cls, "count": n + 1}],
            }
        )

    def colors():
        cls, color = rng.choice(classes), rng.choice(COLORS)
        return {"prompt": f"a photo of {_a(color)} {cls}", "include": [{"class": cls, "count": 1, "color": color}]}

    take("colors", colors)

    def position():
        a, b = rng.sample(classes, 2)
        rel = rng.choice(RELATIONS)
        return {
            "prompt": f"a photo of {_a(b)} {rel} {_a(a)}",
            "include": [{"class": a, "count": 1}, {"class": b, "count": 1, "position": [rel, 0]}],
        }

    take("position", position)

    def color_attr():
        a, b = rng.sample(classes, 2)
        ca, cb = rng.sample(COLORS, 2)
        return {
            "prompt": f"a photo of {_a(ca)} {a} and {_a(cb)} {b}",
            "include": [{"class": a, "count": 1, "color": ca}, {"class": b, "count": 1, "color": cb}],
        }

    take("color_attr", color_attr)
    return out


def split_geneval_prompts(prompts: list[dict], split: str, seed: int = 0) -> list[dict]:
    """`test` (and `all`): the given prompts, GenEval's benchmark. `train`: the same generator under
    another seed, minus every test prompt, so a policy never trains on a prompt it is evaluated on."""
    if split in ("test", "all"):
        return list(prompts)
    if split != "train":
        raise ValueError(f"unknown split {split!r} (train, test or all)")
    held = {p["prompt"] for p in prompts}
    return [p for p in make_geneval_prompts(seed + 1) if p["prompt"] not in held]


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
    for lineno, raw in enumerate(path.read_bytes().splitlines(), 1):
        where = f"{path}:{lineno}"
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise JsbenchError(f"{where}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); save the file as UTF-8") from None
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

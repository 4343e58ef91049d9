"""The ``word-problems`` generator: short word problems on place value, judged by ``math``.

Three shapes, each a sentence or two about everyday things:

* ``groups``: "Each box holds 10 pens. How many pens are in 37 boxes?" (370);
* ``bundles``: "Ana has 4 packs of ten cards and 7 single cards. How many cards is that?"
  (47; from level 2 also crates of a hundred);
* ``sharing`` (level 3): "420 pens are packed in boxes of 10. How many boxes are filled?" (42).

The answer is a plain integer, checked by the ``math`` verifier. Each task keeps the numbers of
its problem in its metadata (``shape``, ``count``, ``per`` or ``digits``), so a recipe can build
demonstrations with typical place-value slips (a zero too many or too few, digits swapped).
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from veriloop.core import Task
from veriloop.tasks._sources import GeneratorOptions, generated_task, register_generator, seeded_streams

_THINGS = (
    ("box", "boxes", "pens", "pen"),
    ("bag", "bags", "apples", "apple"),
    ("jar", "jars", "coins", "coin"),
    ("tray", "trays", "cups", "cup"),
    ("crate", "crates", "books", "book"),
    ("shelf", "shelves", "cards", "card"),
)
_NAMES = ("Ana", "Ben", "Sam", "Mia", "Leo", "Ivy", "Max", "Zoe")
_PLACES = ("ten", "a hundred", "a thousand")
LEVELS = 3


class WordProblemOptions(GeneratorOptions):
    difficulty: int = Field(
        default=1,
        ge=1,
        le=LEVELS,
        description="1: groups and bundles of ten; 2: also of a hundred; 3: also of a thousand, and sharing",
    )
    max_count: int = Field(
        default=99, ge=2, le=9999, description="most groups in a groups problem, or filled in a sharing one"
    )
    domain: str = Field(default="math", min_length=1, description="domain name of the tasks")


def _groups(rng: random.Random, level: int, max_count: int) -> tuple[str, int, dict[str, Any]]:
    one, many, items, _ = rng.choice(_THINGS)
    per = 10 ** rng.randint(1, level)
    count = rng.randint(2, max_count)
    prompt = f"Each {one} holds {per} {items}. How many {items} are in {count} {many}?"
    return prompt, count * per, {"count": count, "per": per}


def _bundles(rng: random.Random, level: int, max_count: int) -> tuple[str, int, dict[str, Any]]:
    _, _, items, item = rng.choice(_THINGS)
    places = rng.randint(2, min(level, 2) + 1)  # tens and ones; from level 2 hundreds too
    digits = [rng.randint(1, 9) for _ in range(places)]
    packs = [
        f"{d} {'crates of' if p == 2 else 'packs of'} {_PLACES[p - 1]} {items}"
        for p, d in zip(range(places - 1, 0, -1), digits)
    ]
    prompt = f"{rng.choice(_NAMES)} has {' and '.join(packs)} and {digits[-1]} single {items if digits[-1] > 1 else item}. How many {items} is that?"
    return prompt, int("".join(map(str, digits))), {"digits": digits}


def _sharing(rng: random.Random, level: int, max_count: int) -> tuple[str, int, dict[str, Any]]:
    _, many, items, _ = rng.choice(_THINGS)
    per = 10 ** rng.randint(1, level - 1)
    count = rng.randint(2, max_count)
    prompt = f"{count * per} {items} are packed in {many} of {per}. How many {many} are filled?"
    return prompt, count, {"count": count, "per": per}


_SHAPES = {"groups": (_groups, 1), "bundles": (_bundles, 1), "sharing": (_sharing, 3)}


@register_generator("word-problems", WordProblemOptions)
def generate_word_problems(options: WordProblemOptions) -> list[Task]:
    """Short word problems on place value (groups, bundles, sharing), answered with an integer."""
    shapes = [name for name, (_, first_level) in _SHAPES.items() if options.difficulty >= first_level]
    tasks = []
    for index, rng in seeded_streams("word-problems", options):
        shape = rng.choice(shapes)
        level = rng.randint(1, options.difficulty)
        prompt, answer, numbers = _SHAPES[shape][0](rng, max(level, _SHAPES[shape][1]), options.max_count)
        tasks.append(
            generated_task(
                "word-problems",
                options,
                index,
                level,
                LEVELS,
                {"shape": shape, **numbers},
                domain=options.domain,
                prompt=prompt,
                verifier={"kind": "math"},
                gold=str(answer),
            )
        )
    return tasks

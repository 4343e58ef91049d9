"""Dynamic test inputs: seeded, type-aware mutations of the inputs a task already uses.

New inputs stay inside the domain the given inputs show, because a reference solution's
output on an input outside a task's unstated preconditions proves nothing: integers keep
their sign class and rough range, strings keep their alphabet, lists keep their element
pool, sortedness, uniqueness and non-emptiness, tuples and dicts keep their shape. Values
are also recombined across the given inputs. The same seed gives the same inputs; another
seed gives others, so answers cannot be memorised.

Inputs whose reference run fails are dropped by the caller (they were out of domain).
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Sequence
from typing import Any

from veriloop.verifiers.code.sandboxed._wire import NotPlainData, call_key, loads_value

_MAX_LIST = 64


def _pool_of(values: Sequence[Any], kind: type) -> list[Any]:
    return [v for v in values if type(v) is kind]


def _mutate_int(value: int, pool: list[int], rng: random.Random) -> int:
    low, high = min(pool + [value]), max(pool + [value])
    span = max(high - low, 4)
    choice = rng.random()
    if choice < 0.4:
        new = value + rng.choice([-3, -2, -1, 1, 2, 3])
    elif choice < 0.8:
        new = rng.randint(low, high)
    else:
        new = rng.randint(low - span // 2, high + span // 2)
    floor = 1 if low >= 1 else 0 if low >= 0 else None
    return max(new, floor) if floor is not None else new


def _decimals(value: float) -> int:
    text = repr(value)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 6


def _mutate_float(value: float, pool: list[float], rng: random.Random) -> float:
    numbers = pool + [value]
    low, high = min(numbers), max(numbers)
    new = rng.uniform(low, high) if high > low else value * rng.uniform(0.5, 1.5) + rng.uniform(-1, 1)
    if low >= 0:
        new = abs(new)
    return round(new, max(_decimals(v) for v in numbers))


def _mutate_str(value: str, pool: list[str], rng: random.Random) -> str:
    alphabet = sorted(set("".join(pool + [value]))) or list("ab")
    chars = list(value)
    operation = rng.randrange(5) if chars else 0
    if operation == 0:
        chars.insert(rng.randint(0, len(chars)), rng.choice(alphabet))
    elif operation == 1:
        del chars[rng.randrange(len(chars))]
    elif operation == 2:
        chars[rng.randrange(len(chars))] = rng.choice(alphabet)
    elif operation == 3 and len(chars) > 1:
        i = rng.randrange(len(chars) - 1)
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
    else:
        rng.shuffle(chars)
    return "".join(chars)


def _mutate_list(value: list[Any], pool: list[list[Any]], rng: random.Random) -> list[Any]:
    lists = pool + [value]
    elements = [item for lst in lists for item in lst]
    items = list(value)
    operation = rng.randrange(5) if items else 0
    if operation == 0 and elements and len(items) < _MAX_LIST:
        seed_item = rng.choice(elements)
        items.insert(rng.randint(0, len(items)), mutate_value(seed_item, elements, rng))
    elif operation == 1 and len(items) > 1:
        del items[rng.randrange(len(items))]
    elif operation == 2 and items:
        i = rng.randrange(len(items))
        items[i] = mutate_value(items[i], elements, rng)
    else:
        rng.shuffle(items)
    if all(lst for lst in lists) and not items and value:
        items = [rng.choice(value)]
    if all(len(set(map(repr, lst))) == len(lst) for lst in lists):
        items = list({repr(item): item for item in items}.values())
    if all(_is_sorted(lst) for lst in lists if len(lst) > 1) and any(len(lst) > 1 for lst in lists):
        try:
            items.sort()
        except TypeError:
            pass
    return items


def _is_sorted(items: list[Any]) -> bool:
    try:
        return all(a <= b for a, b in zip(items, items[1:]))
    except TypeError:
        return False


def mutate_value(value: Any, pool: Sequence[Any], rng: random.Random) -> Any:
    """A seeded variation of ``value`` that stays in the domain shown by ``pool``."""
    kind = type(value)
    same = [v for v in pool if type(v) is kind and v != value]
    if same and rng.random() < 0.25:
        return rng.choice(same)
    if kind is bool:
        return not value
    if kind is int:
        return _mutate_int(value, _pool_of(pool, int), rng)
    if kind is float:
        return _mutate_float(value, _pool_of(pool, float), rng)
    if kind is str:
        return _mutate_str(value, _pool_of(pool, str), rng)
    if kind is list:
        return _mutate_list(value, _pool_of(pool, list), rng)
    if kind is tuple and value:
        i = rng.randrange(len(value))
        column = [t[i] for t in _pool_of(pool, tuple) if len(t) == len(value)]
        return value[:i] + (mutate_value(value[i], column, rng),) + value[i + 1 :]
    if kind is dict and value:
        key = rng.choice(list(value))
        column = [d[key] for d in _pool_of(pool, dict) if key in d]
        return {**value, key: mutate_value(value[key], column, rng)}
    return value


def mutate_calls(base: Sequence[str], count: int, rng: random.Random) -> list[str]:
    """Up to ``count`` new call keys, each a mutation of one of the ``base`` call keys."""
    decoded = []
    for key in dict.fromkeys(base):
        try:
            decoded.append(loads_value(key))
        except NotPlainData:
            continue  # it passes one of the tests' functions: the task's own inputs alone test that
    if not decoded:
        return []
    columns: dict[tuple[int, int | str], list[Any]] = {}
    for args, kwargs in decoded:
        for position, value in [*enumerate(args), *kwargs.items()]:
            columns.setdefault((len(args), position), []).append(value)
    seen, found = set(base), []
    for _ in range(count * 20):
        if len(found) >= count:
            break
        args, kwargs = rng.choice(decoded)
        new_args, new_kwargs = list(args), dict(kwargs)
        positions = [*range(len(args)), *kwargs]
        for position in rng.sample(positions, k=rng.randint(1, len(positions))) if positions else []:
            target = new_args if isinstance(position, int) else new_kwargs
            target[position] = mutate_value(target[position], columns[(len(args), position)], rng)
        try:
            key = call_key(new_args, new_kwargs)
        except NotPlainData:
            continue
        if key not in seen:
            seen.add(key)
            found.append(key)
    return found


def literal_calls(text: str, entry_point: str) -> list[tuple[list[Any], dict[str, Any], int]]:
    """``(args, kwargs, end)`` for each call to ``entry_point`` with literal arguments in
    ``text`` (a docstring's examples); ``end`` is where the call's text ends."""
    found = []
    for match in re.finditer(rf"\b{re.escape(entry_point)}\(", text):
        depth, end = 0, None
        for position in range(match.end() - 1, min(len(text), match.end() + 2000)):
            depth += {"(": 1, ")": -1}.get(text[position], 0)
            if depth == 0:
                end = position + 1
                break
        if end is None:
            continue
        try:
            call = ast.parse(text[match.start() : end], mode="eval").body
            args = [ast.literal_eval(a) for a in call.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        except (SyntaxError, ValueError, TypeError, AttributeError, MemoryError, RecursionError):
            continue
        found.append((args, kwargs, end))
    return found


def example_calls(code: str, entry_point: str) -> list[str]:
    """Call keys of the literal calls to ``entry_point`` shown in ``code``."""
    keys = []
    for args, kwargs, _ in literal_calls(code, entry_point):
        try:
            keys.append(call_key(args, kwargs))
        except (NotPlainData, RecursionError):
            continue
    return list(dict.fromkeys(keys))


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def mutate_stdin(base: Sequence[str], count: int, rng: random.Random) -> list[str]:
    """Up to ``count`` new stdin texts: numbers of the given inputs varied within their range.

    A number that looks like a count (it equals the number of tokens on the next line, or of
    the lines after it) is kept, so the input's shape stays valid.
    """
    if not base:
        return []
    numbers = [float(t) for text in base for t in _NUMBER.findall(text)]
    seen, found = set(base), []
    for _ in range(count * 20):
        if len(found) >= count or not numbers:
            break
        text = rng.choice(list(base))
        lines = text.split("\n")
        out_lines = []
        for index, line in enumerate(lines):
            later = [following for following in lines[index + 1 :] if following.strip()]
            protected = {str(len(later[0].split())) if later else None, str(len(later))}
            out_lines.append(_NUMBER.sub(lambda m: _vary_number(m.group(), protected, numbers, rng), line))  # noqa: B023 (called here)
        new = "\n".join(out_lines)
        if new not in seen:
            seen.add(new)
            found.append(new)
    return found


def _vary_number(token: str, protected: set[str | None], numbers: list[float], rng: random.Random) -> str:
    if token in protected or rng.random() < 0.5:
        return token
    if "." in token:
        pool = [n for n in numbers if n != int(n)] or numbers
        return str(_mutate_float(float(token), pool, rng))
    pool_ints = [int(n) for n in numbers if n == int(n)]
    return str(_mutate_int(int(token), pool_ints, rng))

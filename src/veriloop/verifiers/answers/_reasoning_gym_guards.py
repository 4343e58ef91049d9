"""Answer guards: the answer is checked as data before a scorer that evaluates it sees it.

Some reasoning-gym scorers ``eval`` the answer or parse it with sympy (which ends in
``eval``). Inside the check box that cannot reach the host, but it could still read the
scorer's own variables (the target) or forge its result. So for each such dataset a guard
decides, from the text alone, whether the answer is plain data of the expected shape:

- ``literal_eval_only``: scorers that try ``eval(answer)`` as a fallback (a Python list of
  cells, say) after an exact comparison. Their answers are not refused; while such a scorer
  runs, the builtin ``eval`` is replaced by ``ast.literal_eval`` (``literals_only()``), so the
  fallback reads numbers, strings, lists and tuples and never runs code, and a bare name
  such as ``oracle_answer`` (the scorer's own variable) is an error, not the gold.
- ``arithmetic_over_given_numbers``: countdown-style puzzles ("make 24 from these numbers").
  Only integer literals, ``+ - * /`` (and signs) and parentheses, and each given number used exactly as
  often as it was given: an answer that brings its own numbers solves a different puzzle.
- ``symbolic_expression``: polynomials and antiderivatives. Python tokens only from a
  whitelist: numbers, one-letter variables, arithmetic operators, and calls of a few
  elementary functions. No attribute access, subscripts, strings, keywords or other calls,
  so neither ``__import__`` nor the unevaluated ``Integral(...)`` (a restatement of the
  problem, which a derivative check would accept) gets through. Expanded polynomials must
  carry no parentheses, so restating the product to be expanded is not an answer. Exponents
  are small numbers (or a small fraction), so no power tower stalls the scorer.

``guard_problem(dataset, answer, entry)`` is the problem text, or None when the answer may be
scored. Datasets without a guard are scored as they are. Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import re
import tokenize
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

Guard = Callable[[str, dict[str, Any]], "str | None"]

ELEMENTARY_FUNCTIONS = frozenset(
    {"sin", "cos", "tan", "exp", "log", "sqrt", "asin", "acos", "atan", "sinh", "cosh", "tanh", "Abs"}
)
_ARITHMETIC_OPS = frozenset({"+", "-", "*", "/", "**"})
_ARITHMETIC_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.UAdd)
_NUMBER = re.compile(r"\d+(\.\d+)?")
MAX_GUARDED_CHARS = 10_000
MAX_EXPONENT = 100  # sympy expands powers eagerly: 9**9**9 would run past any time limit


def _parsed(answer: str) -> ast.Expression | None:
    try:
        return ast.parse(answer.strip(), mode="eval")
    except SyntaxError:
        return None


def arithmetic_over_given_numbers(answer: str, entry: dict[str, Any]) -> str | None:
    """None when ``answer`` combines exactly the given numbers with + - * / and parentheses."""
    if len(answer) > MAX_GUARDED_CHARS:
        return "the answer is too long for an arithmetic expression"
    try:
        tree = _parsed(answer)
    except (RecursionError, MemoryError, ValueError):
        return "the answer nests too deeply"
    if tree is None:
        return "the answer is not one arithmetic expression"
    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            used.append(node.value)
        elif not isinstance(node, _ARITHMETIC_NODES):
            return f"the answer may use only the given numbers and + - * / ({type(node).__name__} found)"
    given = entry.get("metadata", {}).get("numbers")
    if not isinstance(given, list):
        raise ValueError("the entry does not list the numbers to use")
    if Counter(used) != Counter(int(n) for n in given):
        return f"the answer uses {sorted(used)}, not exactly the given numbers {sorted(given)}"
    return None


def _tokens(answer: str) -> list[tokenize.TokenInfo] | None:
    try:
        return [
            t
            for t in tokenize.generate_tokens(io.StringIO(answer.strip()).readline)
            if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)
        ]
    except (tokenize.TokenError, SyntaxError):
        return None


def _small_exponent(rest: list[tokenize.TokenInfo]) -> bool:
    """Whether the exponent at the start of ``rest`` is ``N`` or ``(N/M)``, small numbers (no power towers)."""
    words = [t.string for t in rest[:6]]
    if words[:1] and words[0].isdigit():
        return int(words[0]) <= MAX_EXPONENT and words[1:2] != ["**"]
    if len(words) >= 5 and words[0] == "(" and words[2] == "/" and words[4] == ")" and words[5:6] != ["**"]:
        return words[1].isdigit() and words[3].isdigit() and max(int(words[1]), int(words[3])) <= MAX_EXPONENT
    return False


def symbolic_expression(parentheses: bool) -> Guard:
    """A guard for sympy-parsed expressions (``parentheses``: whether grouping is allowed)."""
    allowed_ops = _ARITHMETIC_OPS | ({"(", ")"} if parentheses else set())

    def guard(answer: str, entry: dict[str, Any]) -> str | None:
        if len(answer) > MAX_GUARDED_CHARS or "\n" in answer.strip():
            return "the answer is not one short expression on one line"
        tokens = _tokens(answer)
        if tokens is None:
            return "the answer is not an expression"
        for position, token in enumerate(tokens):
            following = tokens[position + 1].string if position + 1 < len(tokens) else ""
            if token.string == "**" and not _small_exponent(tokens[position + 1 :]):
                return f"exponents may be numbers up to {MAX_EXPONENT} or a fraction of such numbers in parentheses"
            if token.type == tokenize.NUMBER and _NUMBER.fullmatch(token.string):
                continue
            if token.type == tokenize.OP and token.string in allowed_ops:
                continue
            if token.type == tokenize.NAME:
                if token.string in ELEMENTARY_FUNCTIONS and following == "(" and parentheses:
                    continue
                if len(token.string) == 1 and token.string.isascii() and token.string.isalpha() and following != "(":
                    continue
            return f"the answer may not contain {token.string!r} here"
        return None

    return guard


ANSWER_GUARDS: dict[str, Guard] = {
    "countdown": arithmetic_over_given_numbers,
    "puzzle24": arithmetic_over_given_numbers,
    "polynomial_multiplication": symbolic_expression(parentheses=False),
    "simple_integration": symbolic_expression(parentheses=True),
    "intermediate_integration": symbolic_expression(parentheses=True),
}
"""Datasets whose scorer parses the answer as an expression, and the guard each answer must pass first."""

LITERAL_EVAL_DATASETS = frozenset({"string_insertion", "spiral_matrix", "binary_matrix", "n_queens"})
"""Datasets whose scorer calls ``eval`` on the answer; they are scored under ``literals_only()``."""


def literal_eval_only(source: Any, *namespaces: Any) -> Any:
    """``eval`` as these scorers may have it: the value of a literal, else ValueError."""
    if not isinstance(source, str):
        raise TypeError("only the text of a literal can be read")
    return ast.literal_eval(source.strip())


@contextlib.contextmanager
def literals_only(dataset: str) -> Iterator[None]:
    """While the block runs, the builtin ``eval`` reads literals only (for ``LITERAL_EVAL_DATASETS``)."""
    if dataset not in LITERAL_EVAL_DATASETS:
        yield
        return
    original = builtins.eval
    builtins.eval = literal_eval_only
    try:
        yield
    finally:
        builtins.eval = original


def guard_problem(dataset: str, answer: str, entry: dict[str, Any]) -> str | None:
    """Why ``answer`` may not be given to ``dataset``'s scorer, or None."""
    guard = ANSWER_GUARDS.get(dataset)
    return None if guard is None else guard(answer, entry)

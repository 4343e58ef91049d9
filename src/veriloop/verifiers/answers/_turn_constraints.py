"""The ``turn_constraints`` kind: rules set at the start of an episode, kept by every model turn.

An episode's Response carries the text of each model turn (``Response.turns``, tool calls
included); this kind checks every one of them against the configured rules and scores 0 at
the first turn that breaks one, naming the turn and the rule. A response without turns (a
single answer, or the gold) is checked as one turn. Combine it with a check of the final
answer (``all_of``) for a reward that is zero whenever a rule is broken anywhere.

| field                | a turn keeps it when                                                 |
|----------------------|----------------------------------------------------------------------|
| `prefix`             | it begins with this text (leading whitespace ignored)                |
| `forbidden_letters`  | it contains none of these letters, in either case                    |
| `forbidden_words`    | none of these words appears in it as a whole word, in any case       |
| `python_name_prefix` | every name its `<run_python>` code binds (variables, functions,      |
|                      | classes, arguments, loop and `except` targets; not imports) begins   |
|                      | with this text, and that code parses                                 |
| `max_words`          | it has at most this many whitespace-separated words                  |

The checks read the text and parse Python code (never run it) in the caller's process: each
takes time linear in the turn's length (the word patterns are escaped literals, which cannot
backtrack), so no check pool is needed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from pydantic import Field, field_validator, model_validator

from veriloop.core import Task
from veriloop.verifiers._registry import Verdict, VerifierConfig, register_verifier

_PYTHON_CALL = re.compile(r"<run_python>(.*?)</run_python>", re.DOTALL)


class TurnConstraintsConfig(VerifierConfig):
    prefix: str = Field(default="", description="text every turn must begin with")
    forbidden_letters: str = Field(default="", description="letters no turn may contain (either case)")
    forbidden_words: list[str] = Field(default_factory=list, description="words no turn may contain (whole words)")
    python_name_prefix: str = Field(
        default="", description="prefix of every name a turn's <run_python> code binds (imports excepted)"
    )
    max_words: int | None = Field(default=None, ge=1, description="most words in any turn")

    @field_validator("forbidden_letters")
    @classmethod
    def _letters(cls, letters: str) -> str:
        if not all(c.isalpha() for c in letters):
            raise ValueError(f"{letters!r}: give letters only, e.g. 'zq'")
        return letters

    @field_validator("forbidden_words")
    @classmethod
    def _words(cls, words: list[str]) -> list[str]:
        for word in words:
            if not word or any(c.isspace() for c in word):
                raise ValueError(f"{word!r}: each forbidden word is one non-empty word without spaces")
        return words

    @model_validator(mode="after")
    def _some_rule(self) -> TurnConstraintsConfig:
        rules = (self.prefix, self.forbidden_letters, self.forbidden_words, self.python_name_prefix, self.max_words)
        if not any(rules):
            raise ValueError(
                "set at least one rule: prefix, forbidden_letters, forbidden_words, python_name_prefix or max_words"
            )
        return self


def _prefix(config: TurnConstraintsConfig, turn: str) -> str | None:
    if config.prefix and not turn.lstrip().startswith(config.prefix):
        return f"it does not begin with {config.prefix!r}"
    return None


def _letters(config: TurnConstraintsConfig, turn: str) -> str | None:
    folded = turn.casefold()
    used = [letter for letter in config.forbidden_letters if letter.casefold() in folded]
    return f"it uses the letter {used[0]!r}" if used else None


def _words(config: TurnConstraintsConfig, turn: str) -> str | None:
    for word in config.forbidden_words:
        if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", turn, re.IGNORECASE):
            return f"it uses the word {word!r}"
    return None


def _length(config: TurnConstraintsConfig, turn: str) -> str | None:
    if config.max_words is not None and len(turn.split()) > config.max_words:
        return f"it has {len(turn.split())} words, more than {config.max_words}"
    return None


def bound_names(code: str) -> list[str]:
    """The names ``code`` binds: assignment, loop, ``with``, ``except`` and comprehension targets,
    functions, classes and their arguments (imports excepted). Raises SyntaxError (or ValueError,
    RecursionError, MemoryError) for code that does not parse."""
    names = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.arg):
            names.append(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.append(node.name)
    return names


def _python_names(config: TurnConstraintsConfig, turn: str) -> str | None:
    if not config.python_name_prefix:
        return None
    for code in _PYTHON_CALL.findall(turn):
        try:
            names = bound_names(code.strip("\n"))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return "its Python code does not parse, so its names cannot be checked"
        wrong = [name for name in names if not name.startswith(config.python_name_prefix)]
        if wrong:
            return f"its Python code names {wrong[0]!r}, which does not begin with {config.python_name_prefix!r}"
    return None


_RULES: tuple[Callable[[TurnConstraintsConfig, str], str | None], ...] = (
    _prefix,
    _letters,
    _words,
    _python_names,
    _length,
)


def broken_rule(config: TurnConstraintsConfig, turn: str) -> str | None:
    """What ``turn`` breaks (the first rule, in the table's order), or None when it keeps them all."""
    for rule in _RULES:
        problem = rule(config, turn)
        if problem is not None:
            return problem
    return None


@register_verifier("turn_constraints", TurnConstraintsConfig)
def check_turn_constraints(config: TurnConstraintsConfig, task: Task, response: str) -> Verdict:
    """Full credit when every model turn keeps every rule; 0 from the first turn that breaks one."""
    turns = getattr(response, "turns", ()) or (str(response),)
    for number, turn in enumerate(turns, start=1):
        problem = broken_rule(config, turn)
        if problem is not None:
            where = f"turn {number} of {len(turns)}"
            return Verdict(
                0.0,
                False,
                detail=f"{where} breaks a rule: {problem}",
                feedback=f"Your reply at {where} broke a rule given at the start: {problem}.",
            )
    return Verdict(1.0, True, detail=f"all {len(turns)} turn(s) keep every rule")

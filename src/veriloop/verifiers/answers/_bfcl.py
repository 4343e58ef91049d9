"""The ``bfcl`` verifier kind: function calls checked the way the Berkeley Function Calling
Leaderboard's AST checker checks them.

The model answers with its calls as JSON (``[{"name": "f", "arguments": {"a": 1}}]``, one object,
inside a fenced block or ``<tool_call>`` tags) or as Python call syntax (``[f(a=1), g(b="x")]``,
read with ``ast`` and never evaluated); ``_function_calls`` reads them. The answer passes
(reward 1, else 0) when:

- every call names an offered function, and there are exactly as many calls as expected;
- the calls match the expected ones in some order (parallel calls in any order): a call matches
  an expected call of the same function when every required parameter is given, every argument
  is a parameter of the function that the expected call names, each argument's type and value
  fit (``_bfcl_values``: BFCL's type mapping, its int-for-float leniency, its string
  normalisation), and every expected argument that may not be left out is given;
- with no call expected (``answers: []``, BFCL's irrelevance categories), the answer is not
  empty and calls nothing, in any form (words that decline, or ``[]``).

An answer that cannot be read scores 0 with feedback saying why (the model's fault, never an
infra error). Feedback names what is wrong without showing the accepted values.

Where this differs from BFCL's checker: calls are matched to expected calls by a full matching,
not greedily (BFCL can reject a right answer whose first call fits two expected ones); a value
must be a literal (BFCL evaluates ``2+3`` and reads a bare name as its text); a given ``""``
never stands for an argument left out; an empty answer, or a call written anywhere in the
answer, fails the irrelevance categories (BFCL reads only the whole text as a call list).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from veriloop.core import Task
from veriloop.verifiers._registry import Verdict, VerifierConfig, register_verifier
from veriloop.verifiers.answers._bfcl_values import OMITTED, PYTHON_TYPES, argument_problem
from veriloop.verifiers.answers._function_calls import Call, UnreadableCalls, holds_call, read_calls

HOW_TO_ANSWER = (
    "Answer with the calls only, as [func(arg=value, ...), ...] or as JSON "
    '[{"name": "func", "arguments": {...}}], every argument named and given as a literal value.'
)


class BfclConfig(VerifierConfig):
    functions: list[dict[str, Any]] = Field(
        description="the offered functions as BFCL documents them: name, description, "
        "parameters {type, properties: {name: {type, items?, ...}}, required}"
    )
    answers: list[dict[str, dict[str, list[Any]]]] = Field(
        description="one entry per expected call, {function: {parameter: list of accepted values}} as BFCL's "
        "possible answers write it ('' among the values: it may be left out); an empty list expects no call"
    )
    max_chars: int = Field(default=20_000, ge=1, description="longer answers score 0 unread")

    @field_validator("functions")
    @classmethod
    def _valid_functions(cls, functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names = [function.get("name") for function in functions]
        if not all(isinstance(name, str) and name for name in names):
            raise ValueError("every function needs a name")
        if len(set(names)) != len(names):
            raise ValueError("two functions share a name")
        for function in functions:
            _check_parameters(function["name"], function.get("parameters"))
        return functions

    @model_validator(mode="after")
    def _answers_name_offered_functions(self) -> BfclConfig:
        offered = {function["name"] for function in self.functions}
        for entry in self.answers:
            if len(entry) != 1:
                raise ValueError("each expected call is one {function: {parameter: [values]}} entry")
            (name,) = entry
            if name not in offered:
                raise ValueError(f"an expected call names {name!r}, which is not among the functions")
        return self


def _check_parameters(name: str, parameters: Any) -> None:
    """A ValueError unless ``parameters`` holds ``properties`` (each with a known type) and a list
    of ``required`` names."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict) or not all(isinstance(spec, dict) for spec in properties.values()):
        raise ValueError(f"function {name!r} needs parameters.properties, an object of parameter objects")
    for parameter, spec in properties.items():
        if spec.get("type", "any") not in PYTHON_TYPES:
            known = ", ".join(PYTHON_TYPES)
            raise ValueError(f"{name}.{parameter}: type {spec.get('type')!r} is not one of {known}")
    required = parameters.get("required", [])
    if not isinstance(required, list) or not all(isinstance(item, str) for item in required):
        raise ValueError(f"function {name!r}: parameters.required must be a list of parameter names")


def call_problem(call: Call, expected: dict[str, dict[str, list[Any]]], function: dict[str, Any]) -> str | None:
    """What keeps ``call`` from matching the expected call (BFCL's ``simple_function_checker``)."""
    ((name, accepted),) = expected.items()
    if call.name != name:
        return f"calls {call.name}, not {name}"
    parameters = function["parameters"]
    properties = parameters["properties"]
    required = parameters.get("required", [])
    for argument in required:
        if argument not in call.arguments:
            return f"{name}: the required argument {argument!r} is missing"
    for argument, value in call.arguments.items():
        if argument not in properties or argument not in accepted:
            return f"{name}: the argument {argument!r} is not wanted here"
        problem = argument_problem(argument, value, properties[argument], accepted[argument], argument in required)
        if problem:
            return f"{name}: {problem}"
    for argument, values in accepted.items():
        if argument not in call.arguments and OMITTED not in values:
            return f"{name}: the argument {argument!r} is missing"
    return None


def match_problem(calls: list[Call], config: BfclConfig) -> str | None:
    """Why ``calls`` do not answer ``config.answers`` in any order, or None when they do."""
    offered = {function["name"]: function for function in config.functions}
    stray = next((call.name for call in calls if call.name not in offered), None)
    if stray is not None:
        return f"calls {stray}, which is not one of the offered functions ({', '.join(offered)})"
    if len(calls) != len(config.answers):
        return f"makes {len(calls)} call(s); the request needs {len(config.answers)}"
    problems = [[call_problem(call, entry, offered[next(iter(entry))]) for call in calls] for entry in config.answers]
    owner: dict[int, int] = {}  # call index -> expected index

    def assign(expected: int, seen: set[int]) -> bool:
        for index, problem in enumerate(problems[expected]):
            if problem is None and index not in seen:
                seen.add(index)
                if index not in owner or assign(owner[index], seen):
                    owner[index] = expected
                    return True
        return False

    for expected, row in enumerate(problems):
        if not assign(expected, set()):
            name = next(iter(config.answers[expected]))
            same = [problem for call, problem in zip(calls, row) if call.name == name]
            if not same:
                return row[0] if len(row) == 1 else f"no call of {name} fits the request"
            return same[0] or f"no call of {name} fits the request"
    return None


def _no_call_expected(config: BfclConfig, response: str) -> Verdict:
    offered = [function["name"] for function in config.functions]
    if not response.strip():
        return Verdict(
            0.0,
            False,
            detail="empty answer where no offered function fits",
            feedback="None of the offered functions fits the request: say so in words.",
        )
    if holds_call(response, offered):
        return Verdict(
            0.0,
            False,
            detail="calls a function although none of the offered functions fits the request",
            feedback="None of the offered functions fits the request: answer without calling any.",
        )
    return Verdict(1.0, True, detail="no call, as expected", feedback="Correct.")


@register_verifier("bfcl", BfclConfig)
def check_bfcl(config: BfclConfig, task: Task, response: str) -> Verdict:
    """Full credit when the answer's calls match the expected calls by BFCL's AST rules, else 0."""
    if len(response) > config.max_chars:
        return Verdict(
            0.0,
            False,
            detail=f"answer longer than {config.max_chars} characters",
            feedback="The answer is too long; give only the calls.",
        )
    if not config.answers:
        return _no_call_expected(config, response)
    try:
        calls = read_calls(response, [function["name"] for function in config.functions])
    except UnreadableCalls as exc:
        feedback = f"The calls could not be read: {exc}. {HOW_TO_ANSWER}"
        return Verdict(0.0, False, detail=f"unreadable calls: {exc}", feedback=feedback)
    problem = match_problem(calls, config)
    if problem is not None:
        return Verdict(0.0, False, detail=problem, feedback=_feedback(problem))
    return Verdict(1.0, True, detail=f"{len(calls)} call(s) match", feedback="Correct.")


def _feedback(problem: str) -> str:
    return f"The answer {problem}." if problem.startswith(("calls ", "makes ")) else f"Wrong call: {problem}."

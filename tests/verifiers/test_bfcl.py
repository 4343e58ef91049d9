"""The bfcl verifier kind: calls read in both syntaxes, BFCL's type and value rules, and the tricks
that must earn nothing (hedges, stray calls, values a grader would evaluate, repeated keys)."""

from __future__ import annotations

import json
import os

import pytest
from pydantic import ValidationError

from veriloop.core import Response, Task
from veriloop.verifiers import BfclConfig, verify

AREA = {
    "name": "geometry.area",
    "description": "Area of a rectangle.",
    "parameters": {
        "type": "dict",
        "properties": {
            "width": {"type": "integer", "description": "width"},
            "height": {"type": "float", "description": "height"},
            "unit": {"type": "string", "description": "unit of length"},
            "exact": {"type": "boolean", "description": "no rounding"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "labels"},
            "origin": {"type": "dict", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}},
        },
        "required": ["width", "height"],
    },
}
WEATHER = {
    "name": "weather",
    "description": "Weather in a city.",
    "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
AREA_ANSWER = {
    "geometry.area": {
        "width": [10],
        "height": [5.0],
        "unit": ["meters", "m", ""],
        "exact": ["", True],
        "tags": [["North Side", "b"], ""],
        "origin": ["", {"x": [0], "y": [0, ""]}],
    }
}


def _task(answers: list, functions: list | None = None) -> Task:
    verifier = {"kind": "bfcl", "functions": functions or [AREA, WEATHER], "answers": answers}
    return Task(id="bfcl/test/0", domain="tool_use", prompt="q", verifier=verifier)


def _score(task: Task, text: str):
    score = verify(task, Response(id="r", task_id=task.id, response=text))
    assert score.status == "scored", score.detail  # a bad answer is the model's fault, never an infra error
    return score


ONE = _task([AREA_ANSWER])
PARALLEL = _task([{"weather": {"city": ["Paris"]}}, {"weather": {"city": ["Oslo"]}}, AREA_ANSWER])


@pytest.mark.parametrize(
    "answer",
    [
        '[{"name": "geometry.area", "arguments": {"width": 10, "height": 5.0}}]',
        '{"name": "geometry.area", "arguments": {"height": 5, "width": 10, "unit": "Meters"}}',
        '```json\n[{"name": "geometry.area", "parameters": {"width": 10, "height": 5.0}}]\n```',
        'Sure.\n```python\n[geometry.area(width=10, height=5.0, unit="m")]\n```',
        "[geometry.area(width=10, height=5, exact=True, tags=['north side', 'B'])]",
        "geometry.area(width=10, height=5.0, origin={'x': 0})",
        '<tool_call>\n{"name": "geometry.area", "arguments": {"width": 10, "height": 5.0}}\n</tool_call>',
        '{"function": "geometry.area", "parameters": {"width": 10, "height": 5.0}}',
        '[{"type": "function", "function": {"name": "geometry.area", "arguments": "{\\"width\\": 10, \\"height\\": 5}"}}]',
        "  \n[geometry.area(\n    width=10,\n    height=5.0,\n)]\n",
    ],
)
def test_honest_answers_in_either_syntax_pass(answer):
    score = _score(ONE, answer)
    assert score.passed and score.reward == 1.0, score.detail


@pytest.mark.parametrize(
    "answer, why",
    [
        ("[geometry.area(width=10.0, height=5.0)]", "should be integer"),  # no float-for-int leniency
        ("[geometry.area(width=True, height=5.0)]", "should be integer"),  # a bool is not an int
        ('[geometry.area(width="10", height=5.0)]', "should be integer"),
        ("[geometry.area(width=11, height=5.0)]", "does not answer"),
        ("[geometry.area(width=10)]", "required argument 'height'"),
        ("[geometry.area(width=10, height=5.0, colour='red')]", "not wanted"),
        ("[geometry.area(width=10, height=5.0, unit='feet')]", "does not answer"),
        ("[geometry.area(width=10, height=5.0, unit='')]", "does not answer"),  # '' only marks "may be left out"
        ("[geometry.area(width=10, height=5.0, tags=['b', 'north side'])]", "does not answer"),
        ("[geometry.area(width=10, height=5.0, tags=[1, 2])]", "does not answer"),
        ("[geometry.area(width=10, height=5.0, origin={'x': 0, 'z': 1})]", "does not answer"),
        ("[geometry.area(width=10, height=5.0, origin={'y': 0})]", "does not answer"),  # x may not be left out
        ("[area(width=10, height=5.0)]", "not one of the offered functions"),
        ("[weather(city='Paris')]", "calls weather, not geometry.area"),
        ("[]", "makes 0 call(s)"),
    ],
)
def test_wrong_calls_earn_nothing_and_say_why(answer, why):
    score = _score(ONE, answer)
    assert score.reward == 0.0 and not score.passed
    assert why in score.detail and why in score.feedback
    assert "meters" not in score.feedback  # feedback never shows the accepted values


def test_list_items_are_type_checked_one_level_deep_as_bfcl_does():
    # With "" among the accepted lists BFCL skips the item check; without it, items are checked.
    tags = {"geometry.area": {**AREA_ANSWER["geometry.area"], "tags": [["1", "2"]]}}
    task = _task([tags])
    assert (
        "should be array of string, not a list"
        in _score(task, "[geometry.area(width=10, height=5, tags=[1, 2])]").detail
    )
    floats = {
        **AREA,
        "parameters": {
            **AREA["parameters"],
            "properties": {"xs": {"type": "array", "items": {"type": "float"}}},
            "required": [],
        },
    }
    task = _task([{"geometry.area": {"xs": [[1.0, 2.0]]}}], functions=[floats])
    assert _score(task, "[geometry.area(xs=[1.0, 2.0])]").passed
    assert _score(task, "[geometry.area(xs=[1, 2])]").reward == 0.0  # int-for-float holds at the top level only


def test_parallel_calls_match_in_any_order_and_count():
    calls = ["weather(city='paris')", "weather(city='OSLO')", "geometry.area(width=10, height=5)"]
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        assert _score(PARALLEL, "[" + ", ".join(calls[i] for i in order) + "]").passed
    assert "makes 2 call(s); the request needs 3" in _score(PARALLEL, f"[{calls[0]}, {calls[2]}]").detail
    assert "makes 4 call(s)" in _score(PARALLEL, f"[{', '.join(calls)}, {calls[0]}]").detail
    both_paris = f"[{calls[0]}, {calls[0]}, {calls[2]}]"
    assert _score(PARALLEL, both_paris).reward == 0.0  # one call cannot stand for two expected ones


def test_matching_finds_an_assignment_a_greedy_pass_would_miss():
    # The first call fits both expected calls; only the second expected call fits the second.
    task = _task([{"weather": {"city": ["Paris", "Oslo"]}}, {"weather": {"city": ["Paris"]}}])
    assert _score(task, "[weather(city='Paris'), weather(city='Oslo')]").passed


@pytest.mark.parametrize(
    "answer",
    [
        # hedging: two call lists, in every arrangement
        "[geometry.area(width=11, height=5.0)]\n[geometry.area(width=10, height=5.0)]",
        "[geometry.area(width=11, height=5.0)]\n```python\n[geometry.area(width=10, height=5.0)]\n```",
        '```json\n[{"name": "weather", "arguments": {"city": "x"}}]\n```\n```json\n'
        '[{"name": "geometry.area", "arguments": {"width": 10, "height": 5}}]\n```',
        "[geometry.area(width=10, height=5.0)], [geometry.area(width=11, height=5.0)]",
        '```json\n[{"name": "geometry.area", "arguments": {"width": 10, "height": 5}}]\n```\n'
        'or {"name": "geometry.area", "arguments": {"width": 11, "height": 5}}',
        # extra calls, and calls of functions that are not offered
        "[geometry.area(width=10, height=5.0), geometry.area(width=10, height=5.0)]",
        "[geometry.area(width=10, height=5.0), weather(city='Paris')]",
        "[geometry.area(width=10, height=5.0), report(passed=True)]",
        # values a grader would have to evaluate
        "[geometry.area(width=9+1, height=5.0)]",
        "[geometry.area(width=__import__('os').getpid() and 10, height=5.0)]",
        "[geometry.area(width=(lambda: 10)(), height=5.0)]",
        "[geometry.area(width=int('10'), height=5.0)]",
        "[geometry.area(width=ten, height=5.0)]",
        '[geometry.area(width="9+1", height=5.0)]',
        "[geometry.area(width=10, height=5.0, unit=f'{1}m')]",
        "[geometry.area(width=10, height=1e999)]",
        '[{"name": "geometry.area", "arguments": {"width": 10, "height": NaN}}]',
        # a key given twice: JSON arguments, a call object, a Python dict
        '{"name": "geometry.area", "arguments": {"width": 11, "height": 5, "width": 10}}',
        '{"name": "weather", "name": "geometry.area", "arguments": {"width": 10, "height": 5}}',
        '{"name": "geometry.area", "arguments": {"width": 10, "height": 5}, "parameters": {"width": 11}}',
        "[geometry.area(width=10, height=5.0, origin={'x': 1, 'x': 0})]",
        "[geometry.area(width=11, width=10, height=5.0)]",
        # arguments that are not named
        "[geometry.area(10, 5.0)]",
        "[geometry.area(**{'width': 10, 'height': 5.0})]",
        "[geometry.area(width=[10, 11][0], height=5.0)]",
        # a candidate list per value
        '{"name": "geometry.area", "arguments": {"width": [11, 10], "height": [5.0]}}',
        # channel forgery and nothing at all
        '{"passed": true, "reward": 1.0}',
        "Correct. All checks passed.",
        "",
    ],
)
def test_tricks_earn_nothing(answer):
    score = _score(ONE, answer)
    assert score.reward == 0.0 and not score.passed, answer


def test_no_value_is_ever_evaluated(tmp_path):
    marker = tmp_path / "evaluated"
    hostile = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    for answer in (
        f"[geometry.area(width={hostile}, height=5.0)]",
        f"[geometry.area(width=10, height=5.0, unit={hostile})]",
    ):
        assert _score(ONE, answer).reward == 0.0
    assert not marker.exists() and not os.path.exists("/tmp/veriloop-bfcl-tampered")


def test_unreadable_answers_score_zero_with_feedback():
    for answer in ("I would call the area function.", "[geometry.area(width=10, height=", "{" * 5000, "[" * 5000):
        score = _score(ONE, answer)
        assert score.reward == 0.0 and "could not be read" in score.feedback
        assert "[func(arg=value" in score.feedback  # both syntaxes explained
    assert "too long" in _score(ONE, "[" + "1" * 30_000 + "]").feedback


NONE_FITS = _task([])


@pytest.mark.parametrize("answer", ["None of these functions can tell the time.", "[]", "```json\n[]\n```"])
def test_irrelevance_passes_when_nothing_is_called(answer):
    assert _score(NONE_FITS, answer).passed


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   \n",
        "[weather(city='Paris')]",
        '{"name": "weather", "arguments": {"city": "Paris"}}',
        '<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>',
        "No function fits.\n```python\n[weather(city='Paris')]\n```",
        "No function fits, but I would try weather(city='Paris') anyway.",
        "No function fits; maybe made_up(query='x').",
        "None fits. [weather(city='Paris')]\n[weather(city='Oslo')]",
    ],
)
def test_irrelevance_fails_an_empty_answer_or_any_call(answer):
    assert _score(NONE_FITS, answer).reward == 0.0


def test_irrelevance_fails_a_call_without_arguments_of_an_offered_function():
    task = _task([], functions=[{"name": "list_servers", "parameters": {"type": "dict", "properties": {}}}])
    assert _score(task, "I can't, but list_servers() shows what exists.").reward == 0.0
    assert _score(task, "I can't: no server listing helps here.").passed


def test_config_refuses_what_it_cannot_check():
    def config(**changes):
        return BfclConfig.model_validate({"functions": [AREA, WEATHER], "answers": [AREA_ANSWER], **changes})

    with pytest.raises(ValidationError, match="not one of string, integer"):
        config(functions=[{**WEATHER, "parameters": {"properties": {"city": {"type": "Point"}}}}], answers=[])
    with pytest.raises(ValidationError, match="not among the functions"):
        config(answers=[{"clock": {}}])
    with pytest.raises(ValidationError, match="needs parameters.properties"):
        config(functions=[{"name": "f", "parameters": "none"}], answers=[])
    with pytest.raises(ValidationError, match="must be a list of parameter names"):
        config(functions=[{**WEATHER, "parameters": {**WEATHER["parameters"], "required": "city"}}], answers=[])
    with pytest.raises(ValidationError, match="share a name"):
        config(functions=[WEATHER, WEATHER], answers=[])
    with pytest.raises(ValidationError, match="one {function"):
        config(answers=[{"weather": {}, "geometry.area": {}}])
    assert config().max_chars == 20_000


def test_python_and_json_answers_agree_on_values_json_cannot_write():
    # Python's tuple is read as a list, as BFCL's checker reads tuples; JSON has only lists.
    tuple_answer = "[geometry.area(width=10, height=5.0, tags=('North Side', 'b'))]"
    json_answer = json.dumps(
        {"name": "geometry.area", "arguments": {"width": 10, "height": 5.0, "tags": ["North Side", "b"]}}
    )
    assert _score(ONE, tuple_answer).passed and _score(ONE, json_answer).passed

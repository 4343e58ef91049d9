"""The json_schema kind: extraction, schema violations with feedback, gold matching."""

from __future__ import annotations

import time

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import check_task
from veriloop.verifiers import verify

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "number", "minimum": 0}},
    "required": ["name", "price"],
    "additionalProperties": False,
}


def score(response: str, gold=None, **fields):
    verifier = {"kind": "json_schema", "schema": SCHEMA, **fields}
    task = Task(id="t", domain="json", prompt="p", verifier=verifier, gold=gold)
    return verify(task, Response(id="r", task_id="t", response=response))


def test_valid_json_in_each_place():
    assert score('{"name": "pen", "price": 1.5}').passed
    assert score('Here it is:\n```json\n{"name": "pen", "price": 1.5}\n```').passed
    assert score('Sure! {"name": "pen", "price": 1.5} Done.').passed


def test_violations_are_listed_with_their_paths():
    result = score('{"name": "pen", "price": -1, "colour": "red"}')
    assert result.reward == 0.0 and not result.passed
    assert "at $.price" in result.feedback and "minimum" in result.feedback
    assert "colour" in result.feedback


def test_not_json_and_deep_nesting_score_zero():
    assert score("no json here").detail == "no JSON value found"
    deep = "[" * 100_000 + "]" * 100_000
    result = score(deep, extract="full")
    assert result.status == "scored" and result.reward == 0.0


def test_a_value_nested_too_deeply_to_read_is_passed_over_whole():
    deep = '{"name": ' + "[" * 100_000 + '"]]"' + "]" * 100_000 + "}"
    assert score(deep, max_chars=500_000).detail == "no JSON value found"  # nothing inside it is the answer
    assert score(f'{deep} then {{"name": "pen", "price": 1.5}}', max_chars=500_000).passed


def test_the_last_fenced_block_is_the_answer():
    response = '```json\n{"name": "draft"}\n```\nFixed:\n```json\n{"name": "pen", "price": 2}\n```'
    assert score(response).passed


def test_match_gold_compares_values_exactly():
    assert score('{"name": "pen", "price": 2}', gold='{"price": 2, "name": "pen"}', match_gold=True).passed
    wrong = score('{"name": "pen", "price": 3}', gold={"name": "pen", "price": 2}, match_gold=True)
    assert wrong.reward == 0.0 and "wrong content" in wrong.feedback
    assert score('{"name": "pen", "price": 2}', match_gold=True).status == "infra_error"


def test_an_invalid_schema_is_a_task_error():
    task = Task(id="t", domain="d", prompt="p", verifier={"kind": "json_schema", "schema": {"type": "nope"}})
    assert "not a valid JSON Schema" in check_task(task)
    missing = Task(id="t", domain="d", prompt="p", verifier={"kind": "json_schema"})
    assert "missing field 'verifier.schema'" in check_task(missing)


def test_non_finite_numbers_never_satisfy_numeric_bounds():
    for number in ("NaN", "Infinity", "-Infinity", "1e999", "-1e400"):
        for response in (
            f'{{"name": "pen", "price": {number}}}',
            f'```json\n{{"name": "pen", "price": {number}}}\n```',
            f'Here: {{"name": "pen", "price": {number}}} done',
        ):
            result = score(response)
            assert result.status == "scored" and not result.passed, (response, result.detail)
            assert "not standard JSON" in result.detail


def test_finite_numbers_at_the_bounds_still_pass():
    assert score('{"name": "pen", "price": 0}').passed
    assert score('{"name": "pen", "price": 1e300}').passed
    assert score('{"name": "NaN", "price": 2.5E-3}').passed


def test_duplicate_keys_are_an_error_not_last_wins():
    for response in (
        '{"name": "pen", "price": -1, "price": 1}',
        '```json\n{"name": "pen", "price": 1, "price": 1}\n```',
        'Answer: {"name": "pen", "price": -5, "price": 2}',
    ):
        result = score(response)
        assert result.status == "scored" and not result.passed, response
        assert "appears more than once" in result.detail


def test_the_same_key_in_different_objects_is_fine():
    schema = {"type": "array", "items": SCHEMA}
    task = Task(id="t", domain="json", prompt="p", verifier={"kind": "json_schema", "schema": schema})
    response = '[{"name": "a", "price": 1}, {"name": "b", "price": 2}]'
    assert verify(task, Response(id="r", task_id="t", response=response)).passed


@pytest.mark.e2e
def test_a_backtracking_schema_pattern_fails_the_answer_within_the_time_limit():
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
    task = Task(id="t", domain="json", prompt="p", verifier={"kind": "json_schema", "schema": schema})
    honest = verify(task, Response(id="r", task_id="t", response='{"code": "aaa"}'))
    assert honest.passed
    started = time.monotonic()
    hostile = verify(task, Response(id="r", task_id="t", response='{"code": "' + "a" * 40 + '!"}'))
    assert time.monotonic() - started < 15  # the match alone would take hours
    assert hostile.status == "scored" and not hostile.passed and "ran past 5 s" in hostile.detail


OPEN_SCHEMA = {"type": ["object", "array", "number", "string", "boolean", "null"]}


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ({"age": 36}, '{"age": 36.0}'),
        ({"age": 36.0}, '{"age": 36}'),
        ('{"age": 36}', '{"age": 36.0}'),
        ({"ages": [36, 1.5]}, '{"ages": [36.0, 1.5]}'),
        ({"a": {"b": 0}}, '{"a": {"b": 0.0}}'),
        (36, "36.0"),
        ({"flag": True, "n": None}, '{"flag": true, "n": null}'),
    ],
)
def test_numbers_equal_in_value_match_the_gold(gold, answer):
    result = score(answer, gold=gold, schema=OPEN_SCHEMA, match_gold=True)
    assert result.passed, result.detail


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ({"a": 1}, '{"a": true}'),
        ({"a": True}, '{"a": 1}'),
        ({"a": 0}, '{"a": false}'),
        ({"a": False}, '{"a": 0.0}'),
        ({"a": 36}, '{"a": "36"}'),
        ({"a": "36"}, '{"a": 36}'),
        ({"a": [1, 2]}, '{"a": [true, 2]}'),
        ({"a": 1}, '{"a": 1.0000001}'),
        ({"a": 1}, '{"a": 1, "b": 2}'),
        ([1, 2], "[1, 2, 2]"),
        ({"a": None}, '{"a": 0}'),
    ],
)
def test_booleans_strings_and_other_values_never_match_a_number(gold, answer):
    result = score(answer, gold=gold, schema=OPEN_SCHEMA, match_gold=True)
    assert result.status == "scored" and not result.passed, result.detail

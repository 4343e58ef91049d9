"""The bfcl kind against BFCL itself: the same verdicts as BFCL's own AST checker on answers made
from BFCL's possible answers, and the audit finds no exploit that pays and no honest form refused.

BFCL's checker is run from its source in the installed bfcl-eval (``ast_checker.py``); only its
import of the model table (which needs provider SDKs) is replaced by a table in which no model
rewrites dotted names, as for models prompted in text.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from veriloop.core import Response
from veriloop.tasks import BFCL_CATEGORIES, import_tasks
from veriloop.verifiers import audit_tasks, verify

CALL_CATEGORIES = [c for c in BFCL_CATEGORIES if "irrelevance" not in c]
PER_CATEGORY = 25


@pytest.fixture(scope="module")
def bfcl_checker():
    """``check(functions, decoded calls, possible answer, category) -> valid`` from BFCL's source."""
    package = Path(next(iter(importlib.util.find_spec("bfcl_eval").submodule_search_locations)))
    path = package / "eval_checker" / "ast_eval" / "ast_checker.py"
    source = path.read_text(encoding="utf-8")
    table_import = "from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING"
    assert table_import in source
    namespace: dict[str, Any] = {
        "_MODEL_TABLE": defaultdict(lambda: SimpleNamespace(underscore_to_dot=False)),
    }
    exec(compile(source.replace(table_import, "MODEL_CONFIG_MAPPING = _MODEL_TABLE"), str(path), "exec"), namespace)
    checker, language = namespace["ast_checker"], namespace["Language"].PYTHON

    def check(functions, calls, answers, category):
        decoded = [{call["name"]: call["arguments"]} for call in calls]
        return checker(copy.deepcopy(functions), decoded, copy.deepcopy(answers), language, category, "model")["valid"]

    return check


def _other_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 3
    if isinstance(value, str):
        return f"{value} else"
    if isinstance(value, list):
        return value[::-1] + ["x"] if value else ["x"]
    return value


def _candidates(task) -> list[tuple[str, list[dict[str, Any]]]]:
    """Answers built from the task's possible answers: each accepted value, and near misses."""
    gold = json.loads(task.gold)
    answers = task.verifier["answers"]
    properties = {f["name"]: f["parameters"]["properties"] for f in task.verifier["functions"]}
    made = [("gold", gold)]
    for index, (call, entry) in enumerate(zip(gold, answers)):
        ((name, accepted),) = entry.items()

        def variant(label, arguments, index=index):
            calls = copy.deepcopy(gold)
            calls[index]["arguments"] = arguments
            made.append((label, calls))

        for argument, values in accepted.items():
            declared = properties[name].get(argument, {}).get("type")
            for value in values[1:4]:
                if (
                    value != ""
                    and not isinstance(value, dict)
                    and not (isinstance(value, list) and value and isinstance(value[0], dict))
                ):
                    variant(f"{argument}: another accepted value", {**call["arguments"], argument: value})
            if argument in call["arguments"]:
                value = call["arguments"][argument]
                if not isinstance(value, dict):
                    variant(f"{argument}: another value", {**call["arguments"], argument: _other_value(value)})
                if declared == "float" and isinstance(value, float) and value.is_integer():
                    variant(f"{argument}: an int for a float", {**call["arguments"], argument: int(value)})
                if declared == "string" and isinstance(value, str):
                    variant(f"{argument}: upper case", {**call["arguments"], argument: value.upper()})
                variant(f"{argument}: left out", {k: v for k, v in call["arguments"].items() if k != argument})
        variant("an unknown argument", {**call["arguments"], "unasked": 1})
    if len(gold) > 1:
        made += [("reversed", gold[::-1]), ("one call short", gold[:-1])]
    made.append(("a call too many", [*gold, gold[0]]))
    return made


@pytest.mark.parametrize("category", CALL_CATEGORIES)
def test_same_verdicts_as_bfcls_checker(category, bfcl_checker):
    tasks = [t for t in import_tasks("bfcl", category=category, size=PER_CATEGORY) if t.gold is not None]
    checked, passes, disagreements = 0, 0, []
    for task in tasks:
        for label, calls in _candidates(task):
            expected = bfcl_checker(task.verifier["functions"], calls, task.verifier["answers"], category)
            for text in (json.dumps(calls), _python(calls)):
                if text is None:
                    continue
                score = verify(task, Response(id="r", task_id=task.id, response=text))
                assert score.status == "scored"
                checked += 1
                passes += score.passed
                if score.passed != expected:
                    disagreements.append(f"{task.id} {label}: bfcl {expected}, here {score.passed} ({score.detail})")
    assert not disagreements, "\n".join(disagreements[:10])
    assert checked > 100 and 0 < passes < checked  # both verdicts occur


def _python(calls: list[dict[str, Any]]) -> str | None:
    from veriloop.verifiers.audit._exploits_bfcl import python_calls

    return python_calls(calls)


def test_the_audit_finds_no_paying_exploit_and_no_refused_honest_form():
    tasks = [t for category in BFCL_CATEGORIES for t in import_tasks("bfcl", category=category, size=4)]
    report = audit_tasks(tasks, per_kind=len(tasks), repeats=1)
    assert report.ok, (report.gold_failures, report.honest_rejected, [r for r in report.rows if not r.ok])
    categories = {row.category for row in report.rows}
    assert {
        "hedging",
        "not_a_solution",
        "grader_tampering",
        "mutated_gold",
        "resource_abuse",
        "early_exit",
    } <= categories
    assert report.responses > 20 * len(tasks)  # gold, honest forms and exploits for every task

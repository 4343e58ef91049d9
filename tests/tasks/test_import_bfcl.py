"""The bfcl importer on the data bfcl-eval ships: ids, prompts as BFCL writes them, verifier fields
equal to BFCL's possible answers, OpenAI tools, source and version, and gold answers that pass."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from veriloop.core import Response, UserError
from veriloop.tasks import BFCL_CATEGORIES, check_task, import_tasks
from veriloop.tasks.importers._bfcl import SYSTEM_PROMPT, data_dir
from veriloop.verifiers import verify

VERSION = importlib.metadata.version("bfcl-eval")


def _bfcl_rows(name: str) -> dict[str, dict]:
    rows = [json.loads(line) for line in (data_dir() / name).read_text().splitlines() if line.strip()]
    return {row["id"]: row for row in rows}


@pytest.mark.parametrize("category", list(BFCL_CATEGORIES))
def test_a_few_rows_of_every_category(category):
    tasks = import_tasks("bfcl", category=category, size=3)
    entries = _bfcl_rows(f"BFCL_v4_{category}.json")
    answers = {} if "irrelevance" in category else _bfcl_rows(f"possible_answer/BFCL_v4_{category}.json")
    assert len(tasks) == 3
    for task in tasks:
        entry = entries[task.metadata["bfcl_id"]]
        assert task.id == f"bfcl/{category}/{entry['id']}" and task.domain == "tool_use"
        assert task.metadata | {"tools": None} == {
            "source": "bfcl-eval",
            "version": VERSION,
            "category": category,
            "bfcl_id": entry["id"],
            "tools": None,
        }
        assert task.verifier["kind"] == "bfcl" and task.verifier["functions"] == entry["function"]
        expected = [] if "irrelevance" in category else answers[entry["id"]]["ground_truth"]
        assert task.verifier["answers"] == expected
        system, *question = task.prompt
        assert system.role == "system" and system.content.startswith("You are an expert in composing functions.")
        messages = entry["question"][0]
        if messages[0]["role"] == "system":  # the question's own system message follows BFCL's
            assert system.content.endswith("\n\n" + messages[0]["content"])
            messages = messages[1:]
        assert [m.model_dump() for m in question] == messages
        for function in entry["function"]:
            assert json.dumps(function["name"]) in system.content
        assert system.content.count("Note that the provided function is in Python 3 syntax.") == len(entry["function"])
        assert [tool["function"]["name"] for tool in task.metadata["tools"]] == [f["name"] for f in entry["function"]]
        assert check_task(task) is None
        assert verify(task, Response(id="gold", task_id=task.id, response=task.gold)).passed
        if not expected:
            assert "None of the offered functions" in task.gold


def test_the_system_prompt_is_bfcls_default():
    from bfcl_eval.constants import default_prompts as bfcl

    style = bfcl.PROMPT_STYLE_TEMPLATES["classic"]
    tool_call = style["tool_call_no_tag"].format(output_format=bfcl.OUTPUT_FORMAT_MAPPING["python"], param_types="")
    expected = bfcl.PROMPT_TEMPLATE_MAPPING["plaintext"].format(
        persona=style["persona"],
        task=style["task"],
        tool_call_format=tool_call,
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=style["available_tools"].format(format="json", functions="FUNCTIONS"),
    )
    assert (
        "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext" in bfcl.DEFAULT_SYSTEM_PROMPT_FORMAT
    )
    assert SYSTEM_PROMPT.format(functions="FUNCTIONS") == expected


def test_a_questions_own_system_message_follows_bfcls():
    tasks = import_tasks("bfcl", category="live_simple")
    entries = _bfcl_rows("BFCL_v4_live_simple.json")
    with_system = [t for t in tasks if entries[t.metadata["bfcl_id"]]["question"][0][0]["role"] == "system"]
    assert len(with_system) == 11
    for task in with_system:
        question = entries[task.metadata["bfcl_id"]]["question"][0]
        assert [m.role for m in task.prompt] == [m["role"] for m in question]  # one system message, merged
        assert task.prompt[0].content.startswith("You are an expert")
        assert task.prompt[0].content.endswith("\n\n" + question[0]["content"])


def test_openai_tools_map_bfcls_types():
    task = import_tasks("bfcl", category="simple", size=1)[0]
    (tool,) = task.metadata["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "calculate_triangle_area"
    parameters = tool["function"]["parameters"]
    assert parameters["type"] == "object" and parameters["required"] == ["base", "height"]
    assert {name: spec["type"] for name, spec in parameters["properties"].items()} == {
        "base": "integer",
        "height": "integer",
        "unit": "string",
    }
    multiple = import_tasks("bfcl", category="multiple", size=1)[0]
    types = {s["type"] for t in multiple.metadata["tools"] for s in t["function"]["parameters"]["properties"].values()}
    assert "number" in types and not types & {"float", "dict", "tuple", "any"}


def test_gold_answers_pass_except_where_bfcls_own_data_cannot_be_passed():
    unanswerable = {}
    for category in BFCL_CATEGORIES:
        tasks = import_tasks("bfcl", category=category)
        assert len(tasks) == len(_bfcl_rows(f"BFCL_v4_{category}.json"))  # every entry kept: BFCL's denominator
        unanswerable |= {t.id: t.metadata["unanswerable"] for t in tasks if t.gold is None}
    assert unanswerable == {
        "bfcl/live_simple/live_simple_106-63-0": "record: the required argument 'auto_loan_payment_start' is missing",
        "bfcl/live_simple/live_simple_112-68-0": "record: the required argument 'acc_routing_start' is missing",
        "bfcl/live_multiple/live_multiple_862-181-3": "Trains_1_FindTrains: the argument 'journey_start_time' is not wanted here",
        "bfcl/live_multiple/live_multiple_964-207-0": "transfer_to_human_agent: the required argument 'statement' is missing",
    }


def test_categories_it_cannot_check_are_user_errors_naming_the_supported_ones():
    with pytest.raises(
        UserError, match=r"'multi_turn_base' is not supported \(multi-turn.*supported: simple_python, multiple"
    ):
        import_tasks("bfcl", category="multi_turn_base")
    with pytest.raises(UserError, match=r"unknown category 'simpel'; supported: simple_python"):
        import_tasks("bfcl", category="simpel")
    with pytest.raises(UserError, match="missing --category"):
        import_tasks("bfcl")
    assert [t.id for t in import_tasks("bfcl", category="simple", size=2)] == [
        "bfcl/simple_python/simple_python_0",
        "bfcl/simple_python/simple_python_1",
    ]


def test_cli_import_writes_a_valid_set_and_refuses_bad_categories(tmp_path, run_cli):
    out = tmp_path / "bfcl.jsonl"
    result = run_cli("tasks", "import", "bfcl", "--category", "parallel", "--size", "3", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "wrote 3 tasks (tool_use)" in result.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [
        f"bfcl/parallel/parallel_{i}" for i in range(3)
    ]
    for category, words in (("web_search", "needs a live search API"), ("java", "unknown category 'java'")):
        missing = tmp_path / f"{category}.jsonl"
        result = run_cli("tasks", "import", "bfcl", "--category", category, "--out", str(missing))
        assert result.returncode == 2 and words in result.stderr and "supported: simple_python" in result.stderr
        assert "Traceback" not in result.stderr and not missing.exists()

"""Importer ``bfcl``: a single-turn category of the Berkeley Function Calling Leaderboard (BFCL v4),
from the data files the ``bfcl-eval`` package ships (``data/BFCL_v4_<category>.json`` and
``data/possible_answer/``; nothing of the package is imported, so its many pinned needs may be
missing).

Each entry becomes a ``bfcl`` task (``veriloop.verifiers``' ``bfcl`` kind) with id
``bfcl/<category>/<BFCL id>`` and domain ``tool_use``:

- the prompt is BFCL's own prompt for models without a native tool API: a system message (its
  default: calls written as ``[func(arg=value)]``, the functions as a JSON list, each
  description ending with BFCL's note that the function is in Python 3 syntax), then the
  question's messages (a question's own system message follows BFCL's, in the same message);
- the verifier holds the offered functions and BFCL's possible answers (``answers``; ``[]`` for
  the irrelevance categories, where the right answer calls nothing);
- ``metadata.tools`` holds the same functions in OpenAI's function format (types mapped as BFCL
  maps them: ``dict`` as ``object``, ``float`` as ``number``; names kept as BFCL writes them, dots
  included), for a harness that passes tools through an API instead of the prompt;
  ``metadata`` also records the source, the package version, the category and BFCL's id;
- the gold answer is one accepted call list as JSON (for each argument, its first accepted
  value; arguments that may be left out are left out), or a sentence declining to call for the
  irrelevance categories. A few BFCL entries cannot be passed as written (their possible
  answer names a parameter the function lacks, or gives no value); they keep no gold and say why
  in ``metadata.unanswerable``, and stay in the set so that scores count as BFCL counts them.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from veriloop.core import Response, Task, UserError
from veriloop.tasks._sources import SourceOptions, register_importer
from veriloop.verifiers import verify

PACKAGE = "bfcl-eval"
CATEGORIES = {
    "simple_python": "one call of the one offered function",
    "multiple": "one call, the right function chosen among several",
    "parallel": "several calls of the one offered function",
    "parallel_multiple": "several calls among several functions",
    "live_simple": "user-contributed: one call of the one offered function",
    "live_multiple": "user-contributed: one call among several functions",
    "live_parallel": "user-contributed: several calls of one function",
    "live_parallel_multiple": "user-contributed: several calls among several functions",
    "irrelevance": "no offered function fits: the right answer calls nothing",
    "live_irrelevance": "user-contributed: no offered function fits",
}
"""The categories imported, by BFCL's name, with what each asks of the model."""

ALIASES = {"simple": "simple_python"}
UNSUPPORTED = {
    "simple_java": "its values are Java literals in strings, read by BFCL's Java converter",
    "simple_javascript": "its values are JavaScript literals in strings, read by BFCL's JavaScript converter",
    "multi_turn_base": "multi-turn: checked by executing calls against BFCL's stateful APIs",
    "multi_turn_miss_func": "multi-turn: checked by executing calls against BFCL's stateful APIs",
    "multi_turn_miss_param": "multi-turn: checked by executing calls against BFCL's stateful APIs",
    "multi_turn_long_context": "multi-turn: checked by executing calls against BFCL's stateful APIs",
    "web_search": "needs a live search API",
    "memory": "needs BFCL's memory backends and earlier sessions",
    "format_sensitivity": "varies BFCL's prompt format per entry",
    "live_relevance": "any call at all passes: nothing to verify",
}

DECLINE = "None of the offered functions fits this request."
"""The gold answer of the irrelevance categories."""

SYSTEM_PROMPT = (
    "You are an expert in composing functions.You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose. "
    "If none of the functions can be used, point it out. If the given question lacks the parameters required "
    "by the function, also point it out.\n\nYou should only return the function calls in your response.\n\n"
    "If you decide to invoke any of the function(s), you MUST put it in the format of "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)].  "
    "You SHOULD NOT include any other text in the response.\n\n"
    "At each turn, you should try your best to complete the tasks requested by the user within the current "
    "turn. Continue to output functions to call until you have fulfilled the user's request to the best of your "
    "ability. Once you have no more functions to call, the system will consider the current turn complete and "
    "proceed to the next turn or task.\n\n"
    "Here is a list of functions in json format that you can invoke.\n{functions}\n"
)
"""BFCL's default system prompt (``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&
prompt_fmt=plaintext&style=classic``), as its ``formulate_system_prompt`` writes it."""

PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
OPENAPI_TYPES = {
    "integer": "integer",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "tuple": "array",
    "dict": "object",
    "any": "string",
}


class BfclOptions(SourceOptions):
    category: str = Field(description=f"BFCL category: {', '.join(CATEGORIES)} ('simple' for simple_python)")
    size: int | None = Field(default=None, ge=1, description="import only the first N entries")
    domain: str = Field(default="tool_use", min_length=1, description="domain of every task")

    @field_validator("category")
    @classmethod
    def _supported(cls, category: str) -> str:
        category = ALIASES.get(category, category)
        if category in CATEGORIES:
            return category
        supported = ", ".join(CATEGORIES)
        if category in UNSUPPORTED:
            raise ValueError(
                f"category {category!r} is not supported ({UNSUPPORTED[category]}); supported: {supported}"
            )
        raise ValueError(f"unknown category {category!r}; supported: {supported}")


def data_dir() -> Path:
    """The ``data/`` folder of the installed bfcl-eval package (found without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the bfcl importer reads the data of the {PACKAGE} package: pip install --no-deps {PACKAGE}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def package_version() -> str:
    """The installed bfcl-eval's version: BFCL's data changes between releases."""
    return package_metadata.version(PACKAGE)


def _rows(path: Path) -> tuple[dict[str, Any], ...]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"{path}: cannot read BFCL's data: {exc.strerror}") from None
    return tuple(json.loads(line) for line in lines if line.strip())


def _entries(category: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """``(entry, possible answer)`` pairs of a category, in BFCL's order (irrelevance: no answer)."""
    data = data_dir()
    entries = _rows(data / f"BFCL_v4_{category}.json")
    if "irrelevance" in category:
        return [(entry, []) for entry in entries]
    answers = _rows(data / "possible_answer" / f"BFCL_v4_{category}.json")
    by_id = {answer["id"]: answer["ground_truth"] for answer in answers}
    return [(entry, by_id[entry["id"]]) for entry in entries]


def _prompt(entry: dict[str, Any]) -> list[dict[str, str]]:
    functions = copy.deepcopy(entry["function"])
    for function in functions:
        function["description"] = function.get("description", "") + PYTHON_HINT
    system = SYSTEM_PROMPT.format(functions=json.dumps(functions, indent=4))
    messages = [dict(message) for message in entry["question"][0]]
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = f"{system}\n\n{messages[0]['content']}"
        return messages
    return [{"role": "system", "content": system}, *messages]


def _openapi(schema: dict[str, Any]) -> dict[str, Any]:
    converted = dict(schema)
    if "type" in converted:
        converted["type"] = OPENAPI_TYPES.get(converted["type"], "string")
    if isinstance(converted.get("properties"), dict):
        converted["properties"] = {name: _openapi(spec) for name, spec in converted["properties"].items()}
    if isinstance(converted.get("items"), dict):
        converted["items"] = _openapi(converted["items"])
    return converted


def openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's function documents in OpenAI's tool format (``{"type": "function", "function": ...}``)."""
    return [
        {"type": "function", "function": {**function, "parameters": _openapi(function["parameters"])}}
        for function in functions
    ]


def _chosen(accepted: dict[str, list[Any]], required: set[str], top: bool = True) -> dict[str, Any]:
    """Each key's first accepted value, keys that may be left out (``""`` accepted) left out (a
    required key keeps ``""`` when that is its one value). At the top (a call's arguments) a dict
    value, or a list of them, holds accepted values in turn."""
    chosen = {}
    for key, values in accepted.items():
        given = [value for value in values if value != ""] or (values if key in required else [])
        if given and (key in required or "" not in values):
            chosen[key] = _plain_value(given[0]) if top else given[0]
    return chosen


def _plain_value(value: Any) -> Any:
    if isinstance(value, dict):
        return _chosen(value, set(), top=False)
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return [_chosen(item, set(), top=False) for item in value]
    return value


def gold_calls(functions: list[dict[str, Any]], answers: list[dict[str, dict[str, list[Any]]]]) -> str:
    """One accepted call list as JSON: each argument's first accepted value, optional ones left out."""
    required = {f["name"]: set(f["parameters"].get("required", [])) for f in functions}
    calls = []
    for entry in answers:
        ((name, accepted),) = entry.items()
        calls.append({"name": name, "arguments": _chosen(accepted, required.get(name, set()))})
    return json.dumps(calls, ensure_ascii=False)


def _task(category: str, entry: dict[str, Any], answers: list[dict[str, Any]], options: BfclOptions) -> Task:
    functions = entry["function"]
    task = Task(
        id=f"bfcl/{category}/{entry['id']}",
        domain=options.domain,
        prompt=tuple(_prompt(entry)),
        verifier={"kind": "bfcl", "functions": functions, "answers": answers},
        gold=gold_calls(functions, answers) if answers else DECLINE,
        metadata={
            "source": PACKAGE,
            "version": package_version(),
            "category": category,
            "bfcl_id": entry["id"],
            "tools": openai_tools(functions),
        },
    )
    score = verify(task, Response(id="gold", task_id=task.id, response=task.gold))
    if score.status == "infra_error":
        raise UserError(f"{PACKAGE} {package_version()}: entry {entry['id']} cannot be checked: {score.detail}")
    if score.passed:
        return task
    metadata = {**task.metadata, "unanswerable": score.detail}
    return task.model_copy(update={"gold": None, "metadata": metadata})


@register_importer("bfcl", BfclOptions)
def import_bfcl(options: BfclOptions) -> list[Task]:
    """A single-turn BFCL v4 category from the installed bfcl-eval, checked as BFCL's AST checker does."""
    entries = _entries(options.category)[: options.size]
    return [_task(options.category, entry, answers, options) for entry, answers in entries]

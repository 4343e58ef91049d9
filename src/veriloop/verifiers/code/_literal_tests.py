"""Test suites that are pure data: every assert compares one call with literal arguments to
a literal (``assert candidate([1, 2]) == 3``, ``assert candidate('x') is None``,
``assert candidate(5)``, ``assert not candidate(4)``).

Such a suite needs no test process: its inputs and expected values are read from the source
with ``ast.literal_eval`` (which executes nothing), the candidate's process returns plain
results, and the host compares plain data, with the same ``==`` the test code would have
used. Any other statement (a loop, a helper call, arithmetic, an import) makes the suite
ordinary test code, run in its own process as usual. 143 of HumanEval's 164 suites are data.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Literal

from veriloop.verifiers.code._candidate_calls import CallResults
from veriloop.verifiers._memo import Memo
from veriloop.verifiers.code._python_scoring import SHOWN, Tally, render_call, render_outcome, safe_repr
from veriloop.verifiers.code.sandboxed._wire import NotPlainData, call_key, decode_value

Expectation = Literal["equal", "identical", "true", "false"]


@dataclass(frozen=True)
class LiteralCase:
    """One assert of a data-only suite: the call, and what its result must be."""

    line: int
    key: str
    expect: Expectation
    expected: Any = None


_suites: Memo[tuple[LiteralCase, ...] | bool] = Memo()


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _call_key(node: ast.AST, names: set[str]) -> str | None:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names):
        return None
    args, kwargs = [], {}
    for arg in node.args:
        ok, value = _literal(arg)
        if not ok or isinstance(arg, ast.Starred):
            return None
        args.append(value)
    for keyword in node.keywords:
        ok, value = _literal(keyword.value)
        if not ok or keyword.arg is None:
            return None
        kwargs[keyword.arg] = value
    try:
        return call_key(args, kwargs)
    except (NotPlainData, RecursionError):
        return None


def _case(statement: ast.Assert, names: set[str]) -> LiteralCase | None:
    test, line = statement.test, statement.lineno
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        key = _call_key(test.operand, names)
        return LiteralCase(line, key, "false") if key else None
    key = _call_key(test, names)
    if key:
        return LiteralCase(line, key, "true")
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is))):
        return None
    left, right = test.left, test.comparators[0]
    left_key = _call_key(left, names)
    key, other = (left_key, right) if left_key else (_call_key(right, names), left)
    ok, expected = _literal(other)
    if not key or not ok:
        return None
    if isinstance(test.ops[0], ast.Is):
        return LiteralCase(line, key, "identical", expected) if expected in (None, True, False) else None
    return LiteralCase(line, key, "equal", expected)


def _is_inert(statement: ast.stmt) -> bool:
    """Docstrings, ``pass``, ``assert True`` and constant assignments (HumanEval's METADATA)."""
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    if isinstance(statement, ast.Assert) and isinstance(statement.test, ast.Constant) and statement.test.value:
        return True
    return (
        isinstance(statement, ast.Assign)
        and all(isinstance(t, ast.Name) for t in statement.targets)
        and _literal(statement.value)[0]
    )


def _parse_suite(tests: str, entry_point: str) -> tuple[LiteralCase, ...] | None:
    tree = ast.parse(tests)
    names, statements = {entry_point}, []
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == "check" and not statement.decorator_list:
            arguments = statement.args
            if len(arguments.args) != 1 or arguments.vararg or arguments.kwarg or arguments.kwonlyargs:
                return None
            names.add(arguments.args[0].arg)
            statements += statement.body
        elif isinstance(statement, ast.Assert) or _is_inert(statement):
            statements.append(statement)
        else:
            return None
    cases = []
    for statement in statements:
        if _is_inert(statement):
            continue
        case = _case(statement, names) if isinstance(statement, ast.Assert) else None
        if case is None:
            return None
        cases.append(case)
    return tuple(cases) or None


def literal_suite(tests: str, entry_point: str) -> tuple[LiteralCase, ...] | None:
    """The suite's cases when it is pure data, else None (cached per test source)."""
    found = _suites.get((tests, entry_point), lambda: _parse_suite(tests, entry_point) or False)
    return found or None


def _holds(case: LiteralCase, got: Any) -> bool:
    if case.expect == "equal":
        return bool(got == case.expected)
    if case.expect == "identical":
        return got is case.expected
    return bool(got) == (case.expect == "true")


def literal_tally(
    entry_point: str,
    cases: tuple[LiteralCase, ...],
    results: CallResults,
    visible: set[str] = frozenset(),
    dynamic: bool = False,
) -> Tally:
    """Each case checked on the host against the candidate's plain result. When other cases
    exist (some case calls an input not in ``visible``, the prompt's examples, or ``dynamic``
    cases are run too), passed visible cases earn nothing."""
    hidden_exist = dynamic or any(case.key not in visible for case in cases)
    tally = Tally()
    for case in cases:
        outcome = results.outcomes.get(case.key, {"error": "gave no result", "harness": True})
        if "value" in outcome and _holds(case, decode_value(outcome["value"])):
            if not (hidden_exist and case.key in visible):
                tally.passed += 1
                tally.total += 1
            continue
        tally.total += 1
        if len(tally.feedback) >= SHOWN:
            continue
        call_text = render_call(entry_point, case.key)
        if "error" in outcome:
            problem = f"{call_text} {render_outcome(outcome)}."
        elif case.expect in ("equal", "identical"):
            problem = f"{call_text} {render_outcome(outcome)}, expected {safe_repr(case.expected)}."
        else:
            wanted = "a true value" if case.expect == "true" else "a false value"
            problem = f"{call_text} {render_outcome(outcome)}, expected {wanted}."
        if not tally.feedback:
            tally.detail = f"first failure: line {case.line}: {problem}"
        tally.feedback.append(problem)
    return tally

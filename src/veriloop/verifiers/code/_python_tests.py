"""Verifier kind ``python_tests``: unit tests against a function (HumanEval style).

The robust shape of docs/architecture.md, in three places:

1. The candidate's process (sandboxed) defines the answer's program and calls the entry
   point on each test input; it sends back each result as plain data (``_wire``): the value,
   or the exception's message and class names, and any argument the call changed in place;
   a generator's items; for another object (a closure, an instance), a handle whose uses
   (calls, attributes, len, str, ...) are further call keys, answered by replaying them. It
   never sees an expected output.
2. The test process (sandboxed, separate) runs the task's own test code, whose asserts are
   rewritten to record pass or fail; the function under test is a proxy answering from the
   plain results: it raises the candidate's exception as its own class (so ``except``,
   ``pytest.raises`` and ``assertRaises`` catch it), changes arguments as the candidate did,
   and never lets a returned object compare by its own rules. The inputs the tests use are
   learned by running the tests once with no results known (cached per task); inputs that
   depend on earlier results take another round, up to ``MAX_ROUNDS``. A function the tests
   pass to the function under test (a lambda, ``len``, ``str.upper``, a ``key=``) is the task's
   own code: it travels in the call key (``sandboxed/_shipped_callables``: by name, or as
   marshalled code with only the plain globals it reads) and is rebuilt and run in the
   candidate's process; one that cannot travel (a ``functools.partial``, a lambda calling the
   function under test) makes ``veriloop tasks validate`` refuse the task, naming its line.
   A suite that is pure data (literal calls compared to literals, ``_literal_tests``) needs
   no test process: its expected values are read from the source without running it.
3. The host adds up the verdict, compares dynamic tests against the reference's outputs and
   words the feedback.

Partial credit is the fraction of test cases passed. A case is each check reached after a
call to the function: an ``assert``; an ``if TEST: raise ERROR`` (any exception: a case that
fails when TEST holds, as ``assert not TEST`` would); a call of a ``unittest`` assert method
(``assertEqual``, ``assertTrue``, ...); an expected exception (``pytest.raises``,
``assertRaises``, ``try``/``except``); a statement calling a function of the tests on the
function's results (``expect_equal(candidate(2), 4)``) that counts no case itself, failed
when it raises. A failed check fails its case and the tests carry on.
A test unit (``check(candidate)``, the top-level code, each ``test...`` function or
``TestCase`` method the tests define and never call, run as a runner would) that calls the
function but holds no such check (it raises at its end, or in an ``else``) is one case:
passed when it returns, failed when it raises. Tests that stop early count their unreached
cases as failed. Cases
that test only examples shown in the prompt (literal calls in the prompt or its code) earn
nothing: when other cases exist, a visible case passed is left out and a visible case failed
counts as failed, so hard-coding the examples scores 0 and a pass needs the hidden ones. When
every fixed case is visible (HumanEval 34's one assert is its docstring's example), a task with
a gold solution is graded with dynamic cases too, whatever its ``suite``: they are the other
cases. Without a gold solution nothing can tell hard-coding from solving; the visible cases
then count, the verdict's detail says so (``ONLY_VISIBLE``) and ``veriloop audit`` flags the
task. Integers compare exactly. One response's failure (a huge value, tests that cannot finish on
its results, a grader exception while scoring it) is that response's alone in a batch.

With ``unsafe_behaviour_penalty`` the candidate's process runs under the audit hook
(``sandboxed/_audit_hook.py``, added before the answer compiles), in every round: what the
graded run itself did (processes, ``ctypes``, frames, sockets, files outside its directory)
comes back with its results and takes the amount off the reward, with a line of feedback.
A penalty sees only the response's text, so the ``unsafe_behaviour`` penalty of a combination
runs the code apart from the graded run, and code that acts otherwise there (only on the
tests' inputs, only after its first call) dodges it; this field leaves no run to dodge.
"""

from __future__ import annotations

import ast
import builtins
import functools
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from veriloop.core import Task
from veriloop.verifiers.code import _python_scoring as scoring
from veriloop.verifiers._batch import register_batch_check
from veriloop.verifiers.code._audited_run import describe_findings
from veriloop.verifiers.code._candidate_calls import CallRequest, CallResults, Outcome, call_candidate, call_candidates
from veriloop.verifiers.code._code_sandbox import CodeLimits
from veriloop.verifiers.code._dynamic import example_calls, mutate_calls
from veriloop.verifiers.code._extract import candidate_program
from veriloop.verifiers.code._literal_tests import LiteralCase, literal_suite, literal_tally
from veriloop.verifiers._memo import Memo
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_run_check, register_task_check
from veriloop.verifiers._registry import register_verifier
from veriloop.verifiers.code._tests_host import TestPlan, UnsupportedTests, Visible, evaluate_tests, plans_for
from veriloop.verifiers.code.sandboxed._wire import call_key

MAX_ROUNDS = 32
"""Rounds of results a test may depend on (``x = f(f(f(x)))`` needs three); past them the
answer fails (its results kept asking for more), since its own results can drive the chain."""


class PythonTestsConfig(VerifierConfig):
    entry_point: str = Field(description="name of the function under test")
    tests: str = Field(
        default="",
        description="test code: a check(candidate) function (HumanEval) or top-level asserts calling the entry point",
    )
    prompt_code: str = Field(
        default="", description="code the answer continues (signature, helpers); also loaded before the tests"
    )
    inputs: list[list[Any]] = Field(
        default_factory=list, description="extra example argument lists, seeds for dynamic tests"
    )
    suite: Literal["fixed", "dynamic", "both"] = Field(
        default="fixed",
        description="run the fixed tests, dynamic tests against the gold solution, or both "
        "('fixed' adds dynamic tests when every fixed case is an example shown in the prompt)",
    )
    dynamic_cases: int = Field(default=20, ge=1, le=1000, description="number of dynamic test inputs")
    seed: int = Field(default=0, description="seed of dynamic inputs and of the tests' random module")
    scoring: Literal["partial", "all_or_nothing"] = Field(
        default="partial", description="fraction of cases passed, or 1 only when every case passes"
    )
    timeout_s: float = Field(default=6.0, gt=0, le=600, description="time limit of the candidate's process")
    memory_mb: int = Field(default=512, ge=64, le=65536, description="memory limit of each process, MiB")
    rel_tol: float = Field(default=1e-6, ge=0, le=1, description="float tolerance when comparing to the reference")
    unsafe_behaviour_penalty: float | None = Field(
        default=None,
        ge=0,
        description="run the answer under the audit hook and subtract this from its reward when the graded run "
        "created processes, used ctypes, reached for frames, or opened sockets or files outside its directory "
        "(default: no hook)",
    )
    stderr_penalty: float | None = Field(
        default=None,
        ge=0,
        description="subtract this from the reward when the graded run wrote to stderr (a warning, a print to "
        "sys.stderr); the answer still passes if its cases do (default: stderr is ignored)",
    )

    @field_validator("entry_point")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"{name!r} is not a Python function name")
        return name

    @field_validator("tests", "prompt_code")
    @classmethod
    def _parses(cls, code: str) -> str:
        try:
            _names_of(code)  # parsed here once, for the questions the checks below ask of it
        except SyntaxError as exc:
            raise ValueError(f"does not parse: {exc.msg} (line {exc.lineno})") from None
        return code

    @model_validator(mode="after")
    def _has_tests(self) -> PythonTestsConfig:
        if self.suite != "dynamic" and not self.tests.strip():
            raise ValueError(f"suite '{self.suite}' needs 'tests' (or use suite 'dynamic' with a gold solution)")
        return self

    @model_validator(mode="after")
    def _names_defined(self) -> PythonTestsConfig:
        """A name the tests use that nothing defines (``ad(2, 2)`` for ``add(2, 2)``) would fail
        its case at run time, not the answer: it is a mistake in the task."""
        provided = bound_names(self.prompt_code) | bound_names(self.tests) | {self.entry_point}
        for name, line in undefined_names(self.tests, provided):
            raise ValueError(f"tests line {line}: name {name!r} is not defined (a typo for {self.entry_point!r}?)")
        return self

    def limits(self) -> CodeLimits:
        return CodeLimits(self.timeout_s, self.memory_mb)

    def test_limits(self) -> CodeLimits:
        return CodeLimits(self.timeout_s * 2 + 5, max(self.memory_mb, 512))


_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "__builtins__", "_vl_case"}


@dataclass(frozen=True)
class _Names:
    """What one walk of a piece of code finds: the names it binds, each name it reads with its
    line (in walk order), whether it star-imports, and each module it imports with its line."""

    bound: frozenset[str]
    read: tuple[tuple[str, int], ...]
    star_import: bool
    imports: tuple[tuple[str, int], ...]


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_CAUGHT = (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)


def _walk(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` in ``ast.walk``'s order (breadth first), made without its
    generator per node, which costs more than the parse."""
    nodes = [tree]
    for node in nodes:  # the list grows as it is read
        for name in node._fields:
            child = getattr(node, name, None)
            if type(child) is list:
                nodes += [item for item in child if isinstance(item, ast.AST)]
            elif isinstance(child, ast.AST):
                nodes.append(child)
    return nodes


@functools.lru_cache(maxsize=1024)
def _names_of(code: str) -> _Names:
    """One parse and one walk of ``code`` (cached per text): a config's checks and its task's
    check ask several questions of the same tests, once per task of a file."""
    bound: set[str] = set()
    read, imports, star = [], [], False
    for node in _walk(ast.parse(code)):
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is ast.Load:
                read.append((node.id, node.lineno))
            else:
                bound.add(node.id)
        elif kind is ast.arg:
            bound.add(node.arg)
        elif kind in _SCOPES:
            bound.add(node.name)
        elif kind is ast.Import or kind is ast.ImportFrom:
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            if kind is ast.Import:
                imports += [(alias.name, node.lineno) for alias in node.names]
            else:
                star = star or any(alias.name == "*" for alias in node.names)
                if not node.level and node.module:
                    imports.append((node.module, node.lineno))
        elif kind in _CAUGHT and node.name:
            bound.add(node.name)
        elif kind is ast.Global or kind is ast.Nonlocal:
            bound.update(node.names)
    return _Names(frozenset(bound), tuple(read), star, tuple(imports))


def bound_names(code: str) -> set[str]:
    """Every name ``code`` binds anywhere: assignments, loop and ``with`` targets, imports,
    functions, classes and their parameters, comprehension and exception variables."""
    return set(_names_of(code).bound)


def undefined_names(code: str, provided: set[str]) -> list[tuple[str, int]]:
    """``(name, line)`` of each name ``code`` reads that neither it, ``provided`` nor the builtins
    define; none when a star import could define anything."""
    names = _names_of(code)
    if names.star_import:
        return []
    known = provided | _BUILTINS
    found: dict[str, int] = {}
    for name, line in names.read:
        if name not in known:
            found.setdefault(name, line)
    return sorted(found.items(), key=lambda item: item[1])


def foreign_imports(code: str) -> list[tuple[str, int]]:
    """``(module, line)`` of each import of ``code`` that is not of the standard library."""
    imports = _names_of(code).imports
    return [(name, line) for name, line in imports if name.split(".")[0] not in sys.stdlib_module_names]


@register_task_check("python_tests")
def python_tests_task_problem(config: PythonTestsConfig, task: Task) -> str | None:
    """Tests on a task without an environment may import the standard library only (the
    sandbox's interpreter has nothing else); dynamic tests need a gold solution."""
    if task.environment is None:
        for where, code in (("tests", config.tests), ("prompt_code", config.prompt_code)):
            for module, line in foreign_imports(code):
                return (
                    f"{where} line {line} imports {module!r}, which the sandbox's interpreter does not have; "
                    "give the task an environment with it (veriloop env build)"
                )
    if config.suite != "fixed" and not isinstance(task.gold, str):
        return f"suite {config.suite!r} needs the task's gold solution (a string of code)"
    return None


@register_run_check("python_tests")
def python_tests_run_problems(pairs: list[tuple[PythonTestsConfig, Task]]) -> list[str | None]:
    """What the tests pass to the function must be able to reach the candidate's process:
    learned by planning every task's tests in the sandbox at once, as scoring would."""
    checks = [_Check(config, task, "") for config, task in pairs]
    _plan(checks)
    return [str(check.outcome) if isinstance(check.outcome, UnsupportedTests) else None for check in checks]


DynamicSuite = tuple[tuple[str, Outcome], ...]
"""Dynamic cases: call key and the reference's outcome."""

_dynamic_suites: Memo[DynamicSuite] = Memo()


def _dynamic_suite(config: PythonTestsConfig, task: Task, plan: TestPlan) -> DynamicSuite:
    """Seeded mutations of the task's inputs, kept where the gold solution returns a value
    (the same one twice); cached per task, config and seed."""
    if not _has_gold(task):
        raise GraderError("dynamic tests need the task's gold solution (a string of code)")
    base = plan.calls + tuple(call_key(args, {}) for args in config.inputs)
    base = tuple(dict.fromkeys(base + tuple(example_calls(config.prompt_code, config.entry_point))))

    def compute() -> DynamicSuite:
        rng = random.Random(f"{config.seed}:{task.id}")
        inputs = mutate_calls(base, config.dynamic_cases * 2, rng)
        gold = candidate_program(task.gold, config.prompt_code, config.entry_point)
        ran = call_candidate(
            gold, config.entry_point, inputs, config.limits(), repeat=inputs, environment=task.environment
        )
        if ran.load_error or ran.tampered:
            raise GraderError(f"the gold solution does not run: {ran.load_error or ran.tampered}")
        suite = tuple(
            (key, ran.outcomes[key])
            for key in inputs
            if "value" in ran.outcomes.get(key, {}) and not ran.outcomes[key].get("repeat_differs")
        )[: config.dynamic_cases]
        if not suite:
            raise GraderError("no dynamic test input could be made: the gold solution failed on every mutation")
        return suite

    return _dynamic_suites.get((config.model_dump_json(), task.id, task.gold, base), compute)


@dataclass
class _Check:
    """One response on its way through the phases of ``check_many``."""

    config: PythonTestsConfig
    task: Task
    program: str
    plan: TestPlan = TestPlan(calls=(), planned=0)
    visible: Visible = ()
    literal: tuple[LiteralCase, ...] = ()
    suite: DynamicSuite = ()
    results: CallResults = field(default_factory=CallResults)
    answers: dict[str, Outcome] = field(default_factory=dict)
    frame: dict[str, Any] = field(default_factory=dict)
    new_calls: list[str] = field(default_factory=list)
    outcome: Verdict | Exception | None = None

    def request(self, calls: Sequence[str], repeat: Sequence[str] = ()) -> CallRequest:
        """The candidate's run on ``calls``, audited when the task penalises unsafe behaviour, with
        its stderr kept when the task penalises writing there."""
        audited = self.config.unsafe_behaviour_penalty is not None
        stderr = bool(self.config.stderr_penalty)
        return CallRequest(
            self.program,
            self.config.entry_point,
            calls,
            self.config.limits(),
            repeat,
            audited,
            self.task.environment,
            stderr,
        )

    @property
    def fixed(self) -> bool:
        return self.config.suite in ("fixed", "both")

    @property
    def only_visible(self) -> bool:
        """Every fixed case tests only examples shown in the prompt (hard-coding them passes):
        so says the plan, and the tests, once run, reached no other case (a plan is learned
        with no results known, so it misses cases whose inputs are earlier results)."""
        if not self.fixed:
            return False
        if self.literal:
            return all(case.key in self.visible for case in self.literal)
        frame = self.frame
        if frame and frame["passed"] + frame["failed"] > frame["visible_passed"] + frame["visible_failed"]:
            return False
        return self.plan.planned > 0 and self.plan.planned_visible == self.plan.planned

    @property
    def needs_dynamic(self) -> bool:
        """Dynamic cases are run: the config asks for them, or the fixed cases are all visible
        and a gold solution can supply cases the prompt does not show."""
        return self.config.suite != "fixed" or (self.only_visible and _has_gold(self.task))


def _has_gold(task: Task) -> bool:
    return isinstance(task.gold, str) and bool(task.gold.strip())


_shown: Memo[Visible] = Memo()


def _shown_calls(config: PythonTestsConfig, task: Task) -> Visible:
    """Call keys of the examples the model sees: literal calls in the prompt code and the prompt
    (cached per text)."""
    prompt = task.prompt if isinstance(task.prompt, str) else "\n".join(m["content"] for m in task.messages())

    def compute() -> Visible:
        found = example_calls(config.prompt_code, config.entry_point)
        if prompt != config.prompt_code:
            found += example_calls(prompt, config.entry_point)
        return tuple(sorted(set(found)))

    return _shown.get((config.prompt_code, prompt, config.entry_point), compute)


def _plan(checks: list[_Check]) -> None:
    """Plans: read from data-only suites, else learned in batched runs; a grader failure
    settles that check."""
    for check in checks:
        check.visible = _shown_calls(check.config, check.task)
        if check.config.tests.strip():
            check.literal = literal_suite(check.config.tests, check.config.entry_point) or ()
        if check.literal:
            calls = tuple(dict.fromkeys(c.key for c in check.literal))
            check.plan = TestPlan(calls=calls, planned=len(check.literal))
    with_tests = [c for c in checks if c.config.tests.strip() and not c.literal]
    for check, plan in zip(with_tests, plans_for([c.config for c in with_tests], [c.visible for c in with_tests])):
        if isinstance(plan, GraderError):
            check.outcome = plan
        else:
            check.plan = plan


def _prepare(checks: list[_Check]) -> None:
    """Plans and dynamic suites; a grader failure settles that check."""
    _plan(checks)
    for check in checks:
        if check.outcome is None and check.needs_dynamic:
            try:
                check.suite = _dynamic_suite(check.config, check.task, check.plan)
            except GraderError as exc:
                check.outcome = exc


def _run_candidates(checks: list[_Check]) -> None:
    requests = []
    for check in checks:
        dynamic = [key for key, _ in check.suite]
        calls = (list(check.plan.calls) if check.fixed else []) + dynamic
        requests.append(check.request(calls, dynamic))
    for check, results in zip(checks, call_candidates(requests)):
        check.results = results
        check.answers = dict(results.outcomes)
        if results.load_error:
            check.outcome = scoring.failed_to_run(results.load_error, check.config.entry_point)
        elif results.tampered:
            check.outcome = scoring.tampered(results.tampered)


def _run_fixed_tests(checks: list[_Check]) -> None:
    """Evaluate the tests; inputs that only appear once results are known take more rounds."""
    pending = checks
    for round_number in range(MAX_ROUNDS):
        frames = evaluate_tests([(c.config, c.answers, c.visible) for c in pending])
        again = []
        for check, frame in zip(pending, frames):
            if isinstance(frame, GraderError):
                check.outcome = frame
                continue
            if "process_failed" in frame:
                check.outcome = scoring.tests_did_not_finish(frame["process_failed"])
                continue
            check.frame = frame
            check.new_calls = [key for key in frame["new_calls"] if key not in check.answers]
            if check.new_calls:
                again.append(check)
        if not again:
            return
        if round_number == MAX_ROUNDS - 1:
            for check in again:
                check.outcome = scoring.tests_did_not_finish(
                    f"they still asked for new results after {MAX_ROUNDS} rounds"
                )
            return
        for check, more in zip(again, call_candidates([c.request(c.new_calls) for c in again])):
            check.answers.update(more.outcomes)
            check.results.findings += more.findings
            reason = more.load_error or more.tampered or "no result"
            for key in check.new_calls:
                check.answers.setdefault(key, {"error": f"gave no result ({reason})", "harness": True})
        pending = again


@register_batch_check("python_tests")
def check_many(requests: Sequence[tuple[PythonTestsConfig, Task, str]]) -> list[Verdict | Exception]:
    """Check many responses together: plans and test evaluations are batched, candidates run
    concurrently (each in its own process). Grader failures are returned, not raised."""
    checks = [
        _Check(config, task, candidate_program(response, config.prompt_code, config.entry_point))
        for config, task, response in requests
    ]

    def live() -> list[_Check]:
        return [c for c in checks if c.outcome is None]

    _prepare(checks)
    _run_candidates(live())
    _run_fixed_tests([c for c in live() if c.fixed and not c.literal])
    for check in live():
        try:
            check.outcome = _verdict(check)
        except Exception as exc:  # this check's grader broke: its infra error, never its neighbours'
            check.outcome = exc
    for check in checks:
        if isinstance(check.outcome, Verdict) and check.results.findings:
            check.outcome = _penalised(check.outcome, check.results.findings, check.config.unsafe_behaviour_penalty)
        if isinstance(check.outcome, Verdict) and check.config.stderr_penalty and check.results.stderr.strip():
            check.outcome = _stderr_penalised(check.outcome, check.results.stderr, check.config.stderr_penalty)
    return [c.outcome if c.outcome is not None else GraderError("not checked") for c in checks]


def _verdict(check: _Check) -> Verdict:
    tallies = []
    entry_point = check.config.entry_point
    dynamic = bool(check.suite) and (check.config.suite != "fixed" or check.only_visible)
    if check.fixed and check.literal:
        tallies.append(literal_tally(entry_point, check.literal, check.results, set(check.visible), dynamic))
    elif check.fixed:
        tallies.append(scoring.fixed_tally(entry_point, check.frame, check.plan, check.answers, dynamic))
    if dynamic:
        tallies.append(scoring.dynamic_tally(entry_point, check.suite, check.results, check.config.rel_tol))
    verdict = scoring.verdict(tallies, check.config.scoring == "all_or_nothing")
    if check.only_visible and not dynamic:
        return replace(verdict, detail=f"{verdict.detail}; {ONLY_VISIBLE}")
    return verdict


def _penalised(verdict: Verdict, findings: Sequence[str], amount: float | None) -> Verdict:
    """``verdict`` less ``amount`` (never below 0) for what the audit hook saw the graded run do."""
    reason = describe_findings(findings)
    return Verdict(
        max(0.0, verdict.reward - (amount or 0.0)),
        False,
        detail=f"{verdict.detail}; unsafe behaviour: {reason}",
        feedback=f"{verdict.feedback} Penalised: {reason}.".strip(),
    )


def _stderr_penalised(verdict: Verdict, stderr: str, amount: float) -> Verdict:
    """``verdict`` less ``amount`` (never below 0) for writing to stderr; it passes as before."""
    line = stderr.strip().splitlines()[-1][:200]
    return replace(
        verdict,
        reward=max(0.0, verdict.reward - amount),
        detail=f"{verdict.detail}; wrote to stderr: {line}",
        feedback=f"{verdict.feedback} Penalised {amount:g} for writing to stderr: {line}".strip(),
    )


ONLY_VISIBLE = "tests only check visible examples: counted, since no gold solution supplies other cases"
"""The detail of a verdict whose fixed cases all test the prompt's examples and whose task has
no gold solution: hard-coding the examples would pass it (``veriloop audit`` flags such tasks)."""


def only_visible_examples_decide(config: PythonTestsConfig, task: Task) -> bool:
    """Whether hard-coding the prompt's examples passes a ``python_tests`` task: every fixed
    case tests only examples shown in the prompt, and no gold solution supplies dynamic cases.
    A coded suite is planned in the sandbox (cached); one that cannot be planned counts as
    False (its grader error shows when the task is checked)."""
    check = _Check(config, task, "")
    _plan([check])
    return check.outcome is None and check.only_visible and not check.needs_dynamic


@register_verifier("python_tests", PythonTestsConfig)
def check_python_tests(config: PythonTestsConfig, task: Task, response: str) -> Verdict:
    """Run the answer's function against the fixed and/or dynamic tests; see module docs."""
    outcome = check_many([(config, task, response)])[0]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome

"""Runs inside the test process: the task's own tests, against recorded candidate results
(the host's side is ``code/_tests_host.py``).

The test code (HumanEval's ``check(candidate)``, plain top-level asserts, test functions and
``TestCase`` classes left for a runner: ``_test_units``) runs unchanged except that every
``assert`` and every ``if TEST: raise ERROR`` is rewritten to record its outcome and carry on,
so partial credit can be counted; a test unit holding no such check is one case
(``_test_units.run_units``). The function under test is a proxy: a call looks up the candidate's
result for those arguments (plain data, decoded afresh each time) or raises the candidate's
error, after changing the arguments in place as the candidate's call changed them. A call
whose result is not known yet returns a placeholder and is reported back; the host runs the
candidate on those inputs and runs the tests again (the random module is seeded, so reruns
repeat). The candidate's code never runs here.

One process may evaluate several items (one task's tests against one candidate's results
each), each in a fresh namespace: everything here is the task set's own code and plain
data, so batching saves process starts without mixing any candidate's code.

Sent into the sandbox after ``_wire``, ``_channel``, ``_shipped_callables``, ``_expected_raises``
and ``_test_units``;
the imports below are stripped.
"""

import ast

from veriloop.verifiers.code.sandboxed._channel import describe_error, open_channel  # sandbox: strip
from veriloop.verifiers.code.sandboxed._expected_raises import CURRENT, install_expected_raises  # sandbox: strip
from veriloop.verifiers.code.sandboxed._expected_raises import install_counted_asserts  # sandbox: strip
from veriloop.verifiers.code.sandboxed._shipped_callables import shipped_form  # sandbox: strip
from veriloop.verifiers.code.sandboxed._test_units import run_units, uncalled_tests  # sandbox: strip
from veriloop.verifiers.code.sandboxed._wire import NotPlainData, call_key, decode_value, dumps_value  # sandbox: strip

TESTS_FILE = "<tests>"
PROMPT_FILE = "<prompt>"
_SHOWN_FAILURES = 3
_REPR_LIMIT = 240


class CandidateError(Exception):
    """The function under test raised on these inputs (the message is the candidate's)."""


_NOT_REBUILT = (Exception, StopIteration, StopAsyncIteration)
"""Classes a candidate's exception never becomes: a StopIteration would end the tests' own
loops early (``all(map(f, inputs))`` would hold), as if no input had been tried."""


def candidate_exception(outcome, namespace):
    """The candidate's exception, rebuilt so the tests can catch it as they would the real one.

    Its class is the first of its class names (``outcome["raised"]``, its own first) that
    names an exception class of the tests' namespace (the prompt's own exception classes) or
    of the built-ins; a class that is no Exception (SystemExit, KeyboardInterrupt) is never
    rebuilt, since the tests must not end because of the candidate, nor is a StopIteration
    (``_NOT_REBUILT``). Marked ``_vl_candidate``.
    """
    import builtins

    error = None
    for name in outcome.get("raised", ()):
        klass = namespace.get(name, getattr(builtins, name, None))
        if not (isinstance(klass, type) and issubclass(klass, Exception)) or klass in _NOT_REBUILT:
            continue
        try:
            error = klass(outcome["error"])
        except Exception:
            continue
        break
    if error is None:
        error = CandidateError(outcome["error"])
    error._vl_candidate = True
    return error


def _from_candidate(error):
    return getattr(error, "_vl_candidate", False) is True


class _Placeholder:
    __slots__ = ()

    def __repr__(self):
        return "<result not known yet>"


PENDING = _Placeholder()


_MAX_PENDING = 1000
"""Calls one run may answer with a placeholder; a loop driven by unknown results stops there,
and the next round carries on with the results of the inputs it found."""


class _RoundFull(BaseException):
    """Enough new inputs for one round: the run stops, the host asks for their results."""


class _Unsupported(BaseException):
    """The tests do something that cannot be graded across processes (a non-plain argument)."""


def _holds_pending(value, depth=0):
    if value is PENDING:
        return True
    if depth > 32:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds_pending(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return any(_holds_pending(item, depth + 1) for item in value.values())
    return False


def short_repr(value, limit=_REPR_LIMIT):
    """``repr(value)`` clipped to ``limit``; never raises (an int past the digit limit cannot be shown)."""
    try:
        text = repr(value)
    except Exception:
        return "<a value that cannot be shown>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CandidateProxy:
    """Stands in for the function under test; answers from recorded plain results."""

    def __init__(self, answers, namespace):
        self.answers = answers
        self.namespace = namespace
        self.new_calls = {}
        self.count = 0
        self.pending = 0
        self.quiet = False  # while the harness words a failure: objects are not used then
        self.recent = []

    def __call__(self, *args, **kwargs):
        self.count += 1
        try:
            key = call_key(args, kwargs, shipped_form)
        except (NotPlainData, RecursionError) as exc:
            if _holds_pending((args, kwargs)):
                return self._pending()
            raise _Unsupported(_cannot_pass("an argument to the function", exc)) from None
        return self.answer(key, args, kwargs)

    def answer(self, key, args=(), kwargs=None, root=None, index=-1):
        """The candidate's outcome for ``key`` as the tests see it: a value, an exception, an
        iterator over a generator's items, or a ``ReturnedObject`` standing for an object."""
        self.recent.append(key)  # keys only: the host has the outcomes, which may be large
        outcome = self.answers.get(key)
        if outcome is None:
            self.new_calls[key] = None
            return self._pending()
        if kwargs is not None:
            _apply_mutations(args, kwargs, outcome.get("mutated", ()))
        if "object" in outcome:
            return ReturnedObject(self, root or _Uses(key), index)
        if "iterator" in outcome:
            return _replayed_iterator(outcome, self.namespace)
        if "error" in outcome:
            raise candidate_exception(outcome, self.namespace)
        return decode_value(outcome["value"])

    def _pending(self):
        self.pending += 1
        if self.pending > _MAX_PENDING:
            raise _RoundFull
        return PENDING


def _replayed_iterator(outcome, namespace):
    """An iterator over a returned generator's items; it ends as the generator did (raising
    its error, or saying it was cut at the item limit)."""
    for item in outcome["iterator"]:
        yield decode_value(item)
    if "error" in outcome:
        raise candidate_exception(outcome, namespace)
    if not outcome["complete"]:
        raise CandidateError("the generator went on past the item limit; only the first items were kept")


class _Uses:
    """What the tests did with one returned object and the objects it returned, in order."""

    def __init__(self, base):
        self.base = base
        self.operations = []


class ReturnedObject:
    """Stands for an object the function returned (a closure, an instance of its class): each
    use (a call, an attribute, an item, len, iter, in, bool, str, repr) is one more call key,
    answered by replaying every earlier use in the candidate's process. Its result comes back
    as plain data or another ReturnedObject. Comparisons are never delegated: ``==`` is
    identity, as for any object without an ``__eq__`` the tests could trust."""

    __slots__ = ("_vl_proxy", "_vl_uses", "_vl_index")

    def __init__(self, proxy, uses, index):
        object.__setattr__(self, "_vl_proxy", proxy)
        object.__setattr__(self, "_vl_uses", uses)
        object.__setattr__(self, "_vl_index", index)

    def _vl_use(self, kind, payload=None):
        proxy, uses = self._vl_proxy, self._vl_uses
        if proxy.quiet:
            return PENDING
        operation = [self._vl_index, kind, payload]
        try:
            key = dumps_value(["$ops", uses.base, [*uses.operations, operation]], shipped_form)
        except (NotPlainData, RecursionError) as exc:
            if _holds_pending(payload):
                return proxy._pending()
            raise _Unsupported(_cannot_pass("a value to an object the function returned", exc)) from None
        uses.operations.append(operation)
        proxy.count += 1
        return proxy.answer(key, root=uses, index=len(uses.operations) - 1)

    def __call__(self, *args, **kwargs):
        return self._vl_use("call", [list(args), dict(kwargs)])

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._vl_use("attr", name)

    def __getitem__(self, key):
        return self._vl_use("item", key)

    def __len__(self):
        result = self._vl_use("len")
        return result if type(result) is int and result >= 0 else 0

    def __iter__(self):
        result = self._vl_use("iter")
        return iter(()) if result is PENDING else iter(result)

    def __contains__(self, value):
        return self._vl_use("contains", value) is True

    def __bool__(self):
        return self._vl_use("bool") is True

    def __str__(self):
        result = self._vl_use("str")
        return result if type(result) is str else "<an object returned by the function>"

    def __repr__(self):
        result = self._vl_use("repr")
        return result if type(result) is str else "<an object returned by the function>"

    def __eq__(self, other):
        return NotImplemented

    def __ne__(self, other):
        return NotImplemented

    __hash__ = object.__hash__


def _cannot_pass(what, problem):
    """Why the tests cannot be graded, and the line of the tests that passed ``what``."""
    import sys

    frame, line = sys._getframe(1), None
    while frame is not None and line is None:
        line = frame.f_lineno if frame.f_code.co_filename == TESTS_FILE else None
        frame = frame.f_back
    where = f"tests line {line}" if line else "the tests"
    return (
        f"{where} pass {what} that cannot reach the candidate's process ({problem}); pass plain data "
        "(numbers, strings, lists, dicts, ...) or functions the tests define or import by name"
    )


def _apply_mutations(args, kwargs, mutated):
    """Change the tests' own arguments in place as the candidate's call changed its copies."""
    for where, encoded in mutated:
        target = args[where] if type(where) is int and 0 <= where < len(args) else kwargs.get(where)
        value = decode_value(encoded)
        if type(target) is not type(value):
            continue
        if type(target) is list:
            target[:] = value
        else:
            target.clear()
            target.update(value)


class CaseLog:
    """Counts the assertions that test the candidate: every one reached after a call to it.

    A case's calls are those made since the previous case (or, for a further assert about
    the same results, the previous case's). A case all of whose calls are in ``visible``
    (examples shown in the prompt) is also counted apart, so the host can leave it out.
    """

    def __init__(self, proxy, visible=()):
        self.proxy = proxy
        self.visible = set(visible)
        self.passed = 0
        self.failed = 0
        self.visible_passed = 0
        self.visible_failed = 0
        self.failures = []
        self._keys = []

    def statement(self, line, source, run):
        """Run one statement calling a helper of the tests on the function's results
        (``expect_equal(candidate(2), 4)``): when the helper counts no case itself, the
        statement is one, failed when it raises an Exception and passed otherwise."""
        counted, calls = self.passed + self.failed, self.proxy.count
        try:
            run()
        except Exception as error:
            if self.passed + self.failed != counted:
                raise
            self(line, source, False, error)
            return
        if self.passed + self.failed == counted and self.proxy.count > calls:
            self(line, source, True, None)

    def __call__(self, line, source, ok, error, message=None, left=None, right=None, side=None):
        if self.proxy.count == 0:
            return
        if self.proxy.recent:
            self._keys, self.proxy.recent = self.proxy.recent, []
        calls = self._keys
        if error is None:
            try:
                passed = bool(ok)
            except Exception as exc:
                passed, error = False, exc
        else:
            passed = False
        shown = bool(calls) and all(key in self.visible for key in calls)
        if passed:
            self.passed += 1
            self.visible_passed += shown
            return
        self.failed += 1
        self.visible_failed += shown
        if len(self.failures) < _SHOWN_FAILURES:
            self.proxy.quiet = True
            try:
                self.failures.append(self._describe(line, source, error, message, left, right, side, calls))
            finally:
                self.proxy.quiet = False

    def _describe(self, line, source, error, message, left, right, side, calls):
        failure = {"line": line, "source": source[:400], "calls": calls[:3]}
        if error is not None:
            failure["error"] = describe_error(error)
            failure["candidate_error"] = _from_candidate(error)
        if side is not None:
            got, expected = (left, right) if side == "left" else (right, left)
            failure["got"], failure["expected"] = short_repr(got), short_repr(expected)
        if message is not None:
            try:
                said = message()
                said = said.__name__ if isinstance(said, type) else said  # ``raise ValueError``
                failure["message"] = str(said)[:300]
            except Exception:
                pass
        return failure


class _Instrument(ast.NodeTransformer):
    """Rewrites ``assert TEST, MSG`` into the try statement below, reporting to ``_vl_case``;
    ``if TEST: raise ERROR`` likewise, as ``assert not TEST, ERROR``.

    try:
        _vl_ok = TEST                     # or, for LEFT == RIGHT with the call on one side:
    except Exception as _vl_error:        #   _vl_left = LEFT; _vl_right = RIGHT
        _vl_case(LINE, SOURCE, False, _vl_error)   # _vl_ok = _vl_left == _vl_right
    else:
        _vl_case(LINE, SOURCE, _vl_ok, None, lambda: MSG[, _vl_left, _vl_right, SIDE])
    """

    def __init__(self, source, names, helpers=frozenset()):
        self.lines = source.splitlines()
        self.names = names
        self.helpers = helpers

    def visit_Expr(self, node):
        """``HELPER(... candidate(...) ...)``, a function of the tests called on the function's
        results as a statement, reports through ``_vl_case.statement`` (``CaseLog.statement``)."""
        call = node.value
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in self.helpers
            and self._calls_candidate(call)
            and not any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(call))
        ):
            return node
        no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        source = "\n".join(self.lines[node.lineno - 1 : node.end_lineno]).strip()
        report = ast.Attribute(value=ast.Name(id="_vl_case", ctx=ast.Load()), attr="statement", ctx=ast.Load())
        arguments = [ast.Constant(value=node.lineno), ast.Constant(value=source), ast.Lambda(args=no_args, body=call)]
        statement = ast.Expr(value=ast.Call(func=report, args=arguments, keywords=[]))
        return ast.fix_missing_locations(ast.copy_location(statement, node))

    def _calls_candidate(self, node):
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.names for n in ast.walk(node)
        )

    def visit_Assert(self, node):
        if isinstance(node.test, ast.Constant) and node.test.value:
            return ast.copy_location(ast.Pass(), node)
        return self._case(node, node.test, node.msg, ast.Eq)

    def visit_If(self, node):
        """``if TEST: raise ERROR`` (nothing else in it) checks as ``assert not TEST`` does: a
        case, failed when TEST holds, and the tests carry on."""
        self.generic_visit(node)
        body = node.body
        if node.orelse or len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
            return node
        return self._case(node, node.test, body[0].exc, ast.NotEq, negated=True)

    def _case(self, node, test, message_node, compared, negated=False):
        """The try statement reporting ``test`` (its negation when ``negated``) as one case;
        ``compared``: the comparison whose sides are kept for feedback (``==`` for an assert,
        ``!=`` for an ``if``)."""
        where = {
            "lineno": node.lineno,
            "col_offset": node.col_offset,
            "end_lineno": node.end_lineno,
            "end_col_offset": node.end_col_offset,
        }

        def new(kind, **fields):
            return kind(**fields, **where)

        def name(identifier, store=False):
            return new(ast.Name, id=identifier, ctx=ast.Store() if store else ast.Load())

        def report(*args):
            call = new(ast.Call, func=name("_vl_case"), args=list(args), keywords=[])
            return new(ast.Expr, value=call)

        def constant(value):
            return new(ast.Constant, value=value)

        side = None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], compared):
            left, right = self._calls_candidate(test.left), self._calls_candidate(test.comparators[0])
            side = "left" if left and not right else "right" if right and not left else None
        if side:
            compare = new(ast.Compare, left=name("_vl_left"), ops=[compared()], comparators=[name("_vl_right")])
            body = [
                new(ast.Assign, targets=[name("_vl_left", True)], value=test.left),
                new(ast.Assign, targets=[name("_vl_right", True)], value=test.comparators[0]),
            ]
            test, extra = compare, [name("_vl_left"), name("_vl_right"), constant(side)]
        else:
            body, extra = [], []
        if negated:
            test = new(ast.UnaryOp, op=ast.Not(), operand=test)
        body.append(new(ast.Assign, targets=[name("_vl_ok", True)], value=test))
        line, source = constant(node.lineno), constant("\n".join(self.lines[node.lineno - 1 : node.end_lineno]).strip())
        no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        message = new(ast.Lambda, args=no_args, body=message_node) if message_node else constant(None)
        failed = report(line, source, constant(False), name("_vl_error"))
        handler = new(ast.ExceptHandler, type=name("Exception"), name="_vl_error", body=[failed])
        finished = report(line, source, name("_vl_ok"), constant(None), message, *extra)
        return new(ast.Try, body=body, handlers=[handler], orelse=[finished], finalbody=[])

    def visit_Try(self, node):
        """A try statement that calls the function and fails when nothing is raised (an
        ``assert False`` or a ``raise`` in its body or ``else``) expects an exception: entering
        one of its handlers is a passed case, reported first thing in the handler."""
        expects = self._expects_exception(node)
        self.generic_visit(node)
        if expects:
            source = self.lines[node.lineno - 1].strip() if node.lineno <= len(self.lines) else "try:"
            for handler in node.handlers:
                values = [ast.Constant(value=handler.lineno), ast.Constant(value=source), ast.Constant(value=True)]
                call = ast.Call(func=ast.Name(id="_vl_case", ctx=ast.Load()), args=[*values, ast.Constant(value=None)])
                call.keywords = []
                handler.body.insert(0, ast.fix_missing_locations(ast.copy_location(ast.Expr(value=call), handler)))
        return node

    def _expects_exception(self, node):
        if not node.handlers or not any(self._calls_candidate(statement) for statement in node.body):
            return False
        for statement in [*node.body, *node.orelse]:
            for inner in ast.walk(statement):
                if isinstance(inner, ast.Raise):
                    return True
                if isinstance(inner, ast.Assert) and isinstance(inner.test, ast.Constant) and not inner.test.value:
                    return True
        return False


def instrument(source, entry_point):
    """``(code object, defines_check, names read)`` for test source, with asserts rewritten;
    the names the code reads tell which of its test functions it calls itself (``_test_units``)."""
    tree = ast.parse(source, TESTS_FILE)
    names = {entry_point}
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is not None and check.args.args:
        names.add(check.args.args[0].arg)
    read = tuple(sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}))
    helpers = {  # functions of the tests that can fail a check: they raise (``record(x)`` does not)
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name != "check" and any(isinstance(r, ast.Raise) for r in ast.walk(n))
    }
    tree = _Instrument(source, names, helpers - names).visit(tree)
    return compile(tree, TESTS_FILE, "exec"), check is not None, read


def load_tests(prompt_code, tests, entry_point):
    """``(prompt code object, tests code object, defines_check, names read)``; raises on bad code."""
    return (compile(prompt_code, PROMPT_FILE, "exec"), *instrument(tests, entry_point))


def _load(item, job, loaded):
    key = item.get("code_key")
    if key is None or not job.get("compiled"):
        return load_tests(item["prompt_code"], item["tests"], item["entry_point"])
    if key not in loaded:
        import base64
        import marshal

        loaded[key] = marshal.loads(base64.b64decode(job["compiled"][key]))
    return loaded[key]


def _evaluate(item, job, loaded):
    """One task's tests against one candidate's recorded results, in a fresh namespace."""
    import random

    namespace = {"__name__": "__tests__"}
    try:
        prompt, code, defines_check, read = _load(item, job, loaded)
        exec(prompt, namespace)
    except BaseException as exc:
        return {"load_error": describe_error(exc, PROMPT_FILE)}
    proxy = CandidateProxy(item["answers"], namespace)
    cases = CaseLog(proxy, item.get("visible", ()))
    namespace[item["entry_point"]] = proxy
    namespace["_vl_case"] = cases
    CURRENT["case"] = cases
    if "raises" in item["tests"] or "Raises" in item["tests"]:  # importing unittest costs a run ~10 ms
        install_expected_raises()
    if "unittest" in item["tests"] or "TestCase" in item["tests"]:
        install_counted_asserts()
    random.seed(item["seed"])
    if defines_check and "check" not in read:
        try:
            exec(code, namespace)
        except BaseException as exc:
            return {"load_error": describe_error(exc, TESTS_FILE)}
        units = [("check(candidate)", lambda: namespace["check"](proxy))]
    else:  # top-level tests, or a check() the tests call themselves (``check(add)`` at the end)
        units = [("the tests", lambda: exec(code, namespace))]
    try:
        stopped = run_units(units, lambda: uncalled_tests(namespace, read), cases, proxy, _RoundFull, _Unsupported)
    except _Unsupported as exc:
        return {"unsupported": str(exc)}
    aborted = None
    if stopped is not None:
        error, calls = stopped
        aborted = {
            "error": describe_error(error, TESTS_FILE),
            "candidate_error": _from_candidate(error),
            "calls": calls,
        }
    return {
        "passed": cases.passed,
        "failed": cases.failed,
        "visible_passed": cases.visible_passed,
        "visible_failed": cases.visible_failed,
        "failures": cases.failures,
        "aborted": aborted,
        "new_calls": list(proxy.new_calls),
    }


def run_tests(job):
    """Evaluate each of ``job["items"]`` (prompt_code, tests, entry_point, answers: {call key:
    outcome}, seed, visible: call keys shown in the prompt, optional code_key into
    ``job["compiled"]``: marshalled ``load_tests`` output) and emit one frame per item,
    numbered by ``"item"``."""
    emit = open_channel(job["nonce"])
    loaded = {}
    for index, item in enumerate(job["items"]):
        frame = _evaluate(item, job, loaded)
        frame["item"] = index
        emit(frame)

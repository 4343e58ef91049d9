"""Runs inside the test process: the units a task's tests are run in, and the test functions
they define but never call.

A unit is ``check(candidate)``, the tests' top-level code, or one of the tests left for a
runner (below). ``run_units`` runs them in order and counts a unit as one case when it calls
the function but counts no case of its own.

Tests written for a runner (pytest's ``def test_...():``, unittest's ``TestCase`` classes)
define their tests and leave calling them to the runner. After the tests' own code has run,
the test process calls each such test itself, as one unit: a top-level function named
``test...`` that takes no argument and that the tests' code never names again, and each
``test...`` method of a ``TestCase`` subclass the tests define and never name again (set up
and torn down as unittest would). ``unittest.main()`` does nothing here, so a suite that
calls it at top level is run the same way.

Standard library only: sent into the sandbox before ``_tests_process``.
"""

TESTS_CODE_FILE = "<tests>"  # _tests_process.TESTS_FILE, which is sent after this module


def _is_test_function(name, value):
    code = getattr(value, "__code__", None)
    return (
        name.startswith("test")
        and type(value).__name__ == "function"
        and code is not None
        and code.co_filename == TESTS_CODE_FILE
        and code.co_argcount == 0
        and not code.co_kwonlyargcount
    )


def _test_case_classes(namespace, named):
    import sys

    unittest = sys.modules.get("unittest")
    if unittest is None:
        return []
    return [
        value
        for name, value in namespace.items()
        if name not in named
        and isinstance(value, type)
        and issubclass(value, unittest.TestCase)
        and value.__module__ == namespace.get("__name__")
    ]


def _method_unit(klass, method, first, last):
    """Run one test method as unittest would: setUpClass before the class's first, setUp
    before and tearDown after each (even when it fails), tearDownClass after its last."""

    def run():
        if first:
            klass.setUpClass()
        case = klass(method)
        case.setUp()
        try:
            getattr(case, method)()
        finally:
            case.tearDown()
            if last:
                klass.tearDownClass()

    return run


def uncalled_tests(namespace, named):
    """``[(name, run)]`` of the tests ``namespace`` defines for a runner (see the module
    docstring), in the order they were defined; ``named``: every name the tests' code reads."""
    units = [(name, value) for name, value in namespace.items() if name not in named and _is_test_function(name, value)]
    for klass in _test_case_classes(namespace, named):
        import unittest

        methods = unittest.TestLoader().getTestCaseNames(klass)
        for number, method in enumerate(methods):
            unit = _method_unit(klass, method, number == 0, number == len(methods) - 1)
            units.append((f"{klass.__name__}.{method}", unit))
    return units


def run_units(units, more_units, cases, proxy, round_full, unsupported):
    """Run each test unit (``units``, then those ``more_units()`` finds once they ran); the
    first unit to stop the tests after counting cases of its own, as ``(error, recent call
    keys)`` (None if none). ``round_full`` ends the run quietly (a round's inputs are found);
    ``unsupported`` is raised on (the tests cannot be graded).

    A unit that calls the function but counts no case of its own (it checks by raising, at
    its end or in a branch) is one case: passed when it returns, failed when it raises. A
    unit ending with ``sys.exit(0)`` (or ``exit()``) returned: a clean exit is how a script
    says its tests passed; the candidate's own SystemExit never reaches the tests.
    """
    stopped, found = None, False
    while units:
        name, run = units.pop(0)
        counted, calls = cases.passed + cases.failed, proxy.count
        try:
            run()
            error = None
        except round_full:
            return stopped
        except unsupported:
            raise
        except SystemExit as exc:
            error = None if exc.code in (0, None) else exc
        except BaseException as exc:
            error = exc
        if cases.passed + cases.failed == counted and proxy.count > calls:
            cases(_error_line(error), name, error is None, error)
        elif error is not None and stopped is None:
            stopped = (error, proxy.recent[-3:])
        elif error is not None:
            cases(_error_line(error), name, False, error)
        if not units and not found:
            units, found = more_units(), True
    return stopped


def _error_line(error):
    """The last line of the tests that ``error`` passed through (0 when none)."""
    line, tb = 0, getattr(error, "__traceback__", None)
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TESTS_CODE_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line

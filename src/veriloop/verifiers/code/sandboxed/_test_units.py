"""Runs inside the test process: the test functions a task's tests define but never call.

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

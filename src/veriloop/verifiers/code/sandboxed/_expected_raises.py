"""Runs inside the test process: tests that expect the function to raise, and unittest's
assert methods, counted as cases.

``pytest.raises`` (a minimal stand-in, used even where pytest is installed, since its own
raises would stop the tests at the first miss) and unittest's
``assertRaises`` report to the CaseLog of the item being evaluated (``CURRENT["case"]``):
the expected exception raised is a passed case, nothing raised a failed one, and the tests
carry on, as a rewritten ``assert`` does. ``try``/``except`` tests are handled where asserts
are rewritten (``_tests_process._Instrument``). Each call of a ``TestCase.assert...`` method
(``assertEqual``, ``assertTrue``, ``assertIn``, ...) is a case too: a failure is a failed case
and the tests carry on; an assert method that calls another counts once.

Standard library only: sent into the sandbox before ``_tests_process``.
"""

CURRENT = {}
"""The CaseLog of the item being evaluated, for the expected-exception helpers below."""


def _report_expected(passed, what, error=None):
    import sys

    case = CURRENT.get("case")
    if case is not None:
        frame = sys._getframe(2)
        line = frame.f_lineno if frame.f_code.co_filename == "<tests>" else 0  # _tests_process.TESTS_FILE
        case(line, what, passed, error)


class _Raises:
    """``pytest.raises``: context manager or callable form.

    Raising the expected exception is a passed case and raising nothing a failed one (the
    tests carry on); any other exception propagates, as under pytest."""

    def __init__(self, expected, *args, match=None, **kwargs):
        self.expected, self.match, self.value, self.type = expected, match, None, None
        if args:
            with self:
                args[0](*args[1:], **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        import re

        if kind is None:
            _report_expected(False, f"pytest.raises({_name_of(self.expected)})")
            return True
        if not issubclass(kind, self.expected):
            return False
        self.value, self.type = value, kind
        passed = self.match is None or re.search(self.match, str(value)) is not None
        _report_expected(passed, f"pytest.raises({_name_of(self.expected)}, match={self.match!r})")
        return True


def _name_of(expected):
    names = expected if isinstance(expected, tuple) else (expected,)
    return ", ".join(getattr(klass, "__name__", "?") for klass in names)


def install_expected_raises():
    """A minimal ``pytest`` (``raises``, ``fail``) in ``sys.modules``, and unittest's
    ``assertRaises`` counted as a case that, when nothing is raised, fails and carries on."""
    import sys
    import types
    import unittest.case

    if not isinstance(sys.modules.get("pytest"), types.ModuleType) or not hasattr(sys.modules["pytest"], "_vl_shim"):
        module = types.ModuleType("pytest")
        module.raises = _Raises
        module._vl_shim = True

        def fail(reason=""):
            raise AssertionError(reason)

        module.fail = fail
        sys.modules["pytest"] = module
    context = unittest.case._AssertRaisesContext
    if getattr(context, "_vl_counted", False):
        return
    original = context.__exit__

    def __exit__(self, kind, value, traceback):
        try:
            handled = original(self, kind, value, traceback)
        except self.failureException:
            _report_expected(False, f"assertRaises({_name_of(self.expected)})")
            return True
        if handled:
            _report_expected(True, f"assertRaises({_name_of(self.expected)})")
        return handled

    context.__exit__ = __exit__
    context._vl_counted = True


_NOT_COUNTED = ("assertRaises", "assertWarns", "assertLogs", "assertNoLogs")
"""Assert methods that are not one check of a value: the expected-exception ones are counted
by their context (above), the others check logging and warnings."""


def _counted_assert(method, name, depth):
    def counted(self, *args, **kwargs):
        if depth:
            return method(self, *args, **kwargs)
        depth.append(name)
        try:
            method(self, *args, **kwargs)
        except Exception as error:  # a failure, or an error of the values compared: a failed case
            _report_expected(False, name, error)
        else:
            _report_expected(True, name)
        finally:
            depth.clear()

    counted._vl_counted = True
    return counted


def install_counted_asserts():
    """Every ``unittest.TestCase.assert...`` method reports a case (see the module docstring),
    and ``unittest.main`` does nothing (``_test_units`` runs the tests' TestCase classes)."""
    import unittest

    unittest.main = lambda *args, **kwargs: None
    depth = []
    for name in dir(unittest.TestCase):
        method = getattr(unittest.TestCase, name)
        if not name.startswith("assert") or name.startswith(_NOT_COUNTED) or not callable(method):
            continue
        if not getattr(method, "_vl_counted", False):
            setattr(unittest.TestCase, name, _counted_assert(method, name, depth))

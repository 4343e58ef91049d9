"""workspace_tests under pytest: the workspace's code cannot read the hidden tests, on disk or in
the memory of any process of the run, and so cannot answer from them."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify

INITIAL = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a - b\n",
}
HIDDEN = {
    "tests/test_hidden.py": (
        "# unseen-marker-4411\nfrom calc.ops import add\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_add_negative():\n    assert add(-2, -3) == -5\n"
    ),
    "tests/helpers.py": "# unseen-marker-4411\nSMALL = 1\n",
}

ANSWERS_FROM_THE_TESTS = """
import ast as _ast, glob as _glob, os as _os

_answers = {}
_places = ["tests/test_hidden.py", *_glob.glob("**/*.py", recursive=True)]
for _folder, _, _names in _os.walk(_os.getcwd()):
    _places += [_os.path.join(_folder, _name) for _name in _names]
for _place in _places:
    try:
        _tree = _ast.parse(open(_place).read())
    except (OSError, SyntaxError, ValueError):
        continue
    for _node in _ast.walk(_tree):
        if isinstance(_node, _ast.Compare) and isinstance(_node.left, _ast.Call):
            try:
                _key = tuple(_ast.literal_eval(a) for a in _node.left.args)
                _answers[_key] = _ast.literal_eval(_node.comparators[0])
            except ValueError:
                pass


def add(a, b):
    return _answers.get((a, b), a - b)
"""

SPY = """
import glob, os

MARK = "".join(["unseen-", "marker-", "4411"])


def _read(path, limit=1 << 24):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except (OSError, ValueError):
        return b""


def _memory(pid):
    found = b""
    try:
        regions = open("/proc/%s/maps" % pid).read().splitlines()
        memory = open("/proc/%s/mem" % pid, "rb")
    except OSError:
        return found
    with memory:
        for region in regions:
            start, end = (int(part, 16) for part in region.split()[0].split("-"))
            if "r" not in region.split()[1] or end - start > 1 << 28:
                continue
            try:
                memory.seek(start)
                found += memory.read(end - start) if MARK.encode() in memory.read(end - start) else b""
            except (OSError, ValueError, OverflowError):
                continue
    return found[:100]


def places():
    seen = []
    paths = ["tests/test_hidden.py", "tests/helpers.py", *glob.glob("**/*", recursive=True)]
    for folder, _, names in os.walk(os.getcwd()):
        paths += [os.path.join(folder, name) for name in names]
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    for pid in others:
        paths += ["/proc/%s/%s" % (pid, part) for part in ("cmdline", "environ")]
        paths += glob.glob("/proc/%s/fd/*" % pid)
    for path in paths:
        if MARK.encode() in _read(path):
            seen.append(path)
    seen += ["/proc/%s/mem" % pid for pid in others if _memory(pid)]
    return seen
"""
LOOKING = {
    "tests/test_looking.py": "from calc import spy\n\n\ndef test_nothing_seen():\n    assert spy.places() == []\n",
}


def _task(hidden: dict[str, str]) -> Task:
    verifier = {"kind": "workspace_tests", "files": hidden}
    return Task(
        id="calc", domain="terminal", prompt="fix add", verifier=verifier, environment="pytest", workspace=INITIAL
    )


def _score(hidden: dict[str, str], workspace: dict[str, str]):
    return verify(_task(hidden), Response(id="r", task_id="calc", response="done", workspace=workspace))


def test_answers_read_from_the_hidden_tests_earn_nothing(env_with_pytest):
    score = _score(HIDDEN, {**INITIAL, "calc/ops.py": ANSWERS_FROM_THE_TESTS})
    assert score.status == "scored" and score.reward == 0.0, score.detail


def test_the_hidden_tests_are_seen_nowhere_by_the_code(env_with_pytest):
    score = _score({**HIDDEN, **LOOKING}, {**INITIAL, "calc/spy.py": SPY})
    assert "test_looking.py::test_nothing_seen" not in score.detail, score.detail
    assert score.reward == pytest.approx(1 / 3), score.detail  # add stays wrong: only the spy's test passes


HONEST = {
    "tests/test_honest.py": (
        "import inspect\n\nimport pytest\n\nfrom calc.ops import add\nfrom tests.helpers import SMALL\n\n\n"
        "@pytest.mark.parametrize('a, b', [(SMALL, 2), (3, 4)])\ndef test_parametrized(a, b):\n"
        "    assert add(a, b) == a + b\n\n\n"
        "class TestTracebacks:\n    def test_failure_shows_the_held_source(self):\n"
        "        with pytest.raises(AssertionError) as caught:\n            assert add(1, 1) == 3\n"
        "        assert 'assert 2 == 3' in str(caught.value)\n"
        "        assert 'assert add(1, 1) == 3' in str(caught.getrepr())\n\n"
        "    def test_source_of_a_test(self):\n"
        "        assert 'def test_source_of_a_test' in inspect.getsource(TestTracebacks)\n"
    ),
    "tests/helpers.py": "SMALL = 1\n",
}


def test_hidden_tests_held_in_memory_still_collect_parametrize_and_show_their_source(env_with_pytest):
    score = _score(HONEST, {**INITIAL, "calc/ops.py": "def add(a, b):\n    return a + b\n"})
    assert score.passed and "4/4 hidden tests passed" in score.detail, score.detail

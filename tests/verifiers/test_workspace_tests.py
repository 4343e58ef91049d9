"""workspace_tests: hidden tests on the final workspace; no planted file or trick earns reward."""

from __future__ import annotations

import io
import py_compile
import sys
import tarfile

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify

INITIAL = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return 2 * x\n",
    "tests/test_visible.py": "from calc.ops import add\n\n\ndef test_add_small():\n    assert add(1, 1) == 2\n",
}
FIXED = {**INITIAL, "calc/ops.py": INITIAL["calc/ops.py"].replace("a - b", "a + b")}
HIDDEN = {
    "tests/test_hidden.py": (
        "import pytest\nfrom calc.ops import add, double\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "@pytest.mark.parametrize('n', [0, 4])\ndef test_double(n):\n    assert double(n) == n + n\n\n\n"
        "class TestMore:\n    def test_negative(self):\n        assert add(-2, -3) == -5\n"
    )
}


@pytest.fixture(scope="module")
def task(env_with_pytest) -> Task:
    verifier = {"kind": "workspace_tests", "files": HIDDEN}
    return Task(
        id="calc", domain="terminal", prompt="fix add", verifier=verifier, environment="pytest", workspace=INITIAL
    )


def _pytest_task(task_id: str, hidden: dict[str, str], workspace: dict[str, str]) -> Task:
    verifier = {"kind": "workspace_tests", "files": hidden}
    return Task(id=task_id, domain="terminal", prompt="p", verifier=verifier, environment="pytest", workspace=workspace)


def _score(task: Task, workspace: dict | None):
    return verify(task, Response(id="r", task_id=task.id, response="done", workspace=workspace))


def test_the_fixed_workspace_passes_and_records_the_environment(task, env_with_pytest):
    score = _score(task, FIXED)
    assert score.reward == 1.0 and score.passed, score.detail
    assert "4/4 hidden tests passed" in score.detail
    assert score.environment == env_with_pytest.hash


def test_the_unfixed_workspace_earns_the_fraction_that_passes(task):
    score = _score(task, INITIAL)
    assert score.reward == pytest.approx(2 / 4) and not score.passed, score.detail
    assert "test_add," in score.detail and "TestMore.test_negative" in score.detail
    assert _score(task, None).reward == score.reward  # no workspace: the initial one is judged


def test_all_or_nothing(task):
    strict = task.model_copy(update={"verifier": {**task.verifier, "all_or_nothing": True}})
    assert _score(strict, INITIAL).reward == 0.0
    assert _score(strict, FIXED).reward == 1.0


PLANTED = {
    "conftest forcing passes": {
        "conftest.py": (
            "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"
        )
    },
    "conftest in the tests folder": {
        "tests/conftest.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n"
    },
    "plugin named by a config file": {
        "pytest.ini": "[pytest]\naddopts = -p forcepass\n",
        "forcepass.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n",
    },
    "deselection in pyproject": {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-k nothing'\n"},
    "sitecustomize": {"sitecustomize.py": "import os\nos._exit(0)\n"},
    "usercustomize": {"usercustomize.py": "import os\nos._exit(0)\n"},
    "pth file": {"calc/evil.pth": "import os; os._exit(0)\n"},
    "fake pytest module": {"pytest.py": "import sys\nsys.exit(0)\n"},
    "fake pytest package": {
        "pytest/__init__.py": "import sys\nsys.exit(0)\n",
        "pytest/__main__.py": "raise SystemExit(0)\n",
    },
    "modified hidden test": {"tests/test_hidden.py": "def test_add():\n    assert True\n"},
    "premade report": {
        "report.xml": '<testsuite tests="4"><testcase classname="tests.test_hidden" name="test_add"/></testsuite>',
        ".verdict/report.xml": '<testsuite tests="4"/>',
    },
    "hidden path taken by a folder": {"tests/test_hidden.py/x": "boom"},
    "module-level skip": {"calc/ops.py": "import pytest\npytest.skip('later', allow_module_level=True)\n"},
    "exit before reporting": {"calc/ops.py": "import os\nos._exit(0)\n"},
}


@pytest.mark.parametrize("technique", sorted(PLANTED))
def test_planted_test_machinery_earns_nothing(task, technique):
    score = _score(task, {**INITIAL, **PLANTED[technique]})
    assert score.status == "scored" and score.reward < 1.0 and not score.passed, (technique, score.detail)
    assert score.reward <= 0.5, (technique, score.detail)  # never more than the unfixed workspace


WRONG_ADD = (
    "\n\ndef double(x):\n    return 2 * x\n\n\nif 'add' not in globals():\n    def add(a, b):\n        return 0\n"
)
FORGED_REPORT = (
    "def _forge():\n"
    "    import sys\n"
    "    path = next((a.split('=', 1)[-1] for a in sys.argv if a.endswith('.xml')), None)\n"
    "    if path is None and '--junitxml' in sys.argv:\n"
    "        path = sys.argv[sys.argv.index('--junitxml') + 1]\n"
    "    if path:\n"
    '        cases = \'\'.join(\'<testcase classname="tests.test_hidden%s" name="%s" file="tests/test_hidden.py"/>\' % c\n'
    "                        for c in [('', 'test_add'), ('', 'test_double[0]'), ('', 'test_double[4]'),\n"
    "                                  ('.TestMore', 'test_negative')])\n"
    "        open(path, 'w').write('<testsuites><testsuite tests=\"4\">' + cases + '</testsuite></testsuites>')\n"
)
IN_PROCESS = {
    "patched TestReport": (
        "import _pytest.reports\n_init = _pytest.reports.TestReport.__init__\n\n\n"
        "def _passed(self, *a, **k):\n    _init(self, *a, **k)\n    self.outcome = 'passed'\n    self.longrepr = None\n\n\n"
        "_pytest.reports.TestReport.__init__ = _passed\n"
    ),
    "report rewritten at exit": FORGED_REPORT + "import atexit\natexit.register(_forge)\n",
    "report rewritten by a forked child": (
        FORGED_REPORT + "import os, time\nif os.fork() == 0:\n"
        "    parent = os.getppid()\n"
        "    while os.getppid() == parent:\n        time.sleep(0.01)\n"
        "    _forge()\n    os._exit(0)\n"
    ),
    "outcome lines forged on every reachable descriptor": (
        "import glob, json, os\n\n"
        "_lines = ''.join(json.dumps({'nodeid': 'tests/test_hidden.py::' + name, 'when': 'call', 'outcome': 'passed'})\n"
        "                 + '\\n' for name in ('test_add', 'test_double[0]', 'test_double[4]', 'TestMore::test_negative'))\n"
        "for _path in ['/dev/fd/%d' % n for n in range(256)] + glob.glob('/proc/*/fd/*'):\n"
        "    try:\n        _fd = os.open(_path, os.O_WRONLY | os.O_NONBLOCK)\n"
        "        os.write(_fd, _lines.encode())\n        os.close(_fd)\n"
        "    except OSError:\n        pass\n"
    ),
    "every other process killed": (
        "import os\n\nfor pid in [int(n) for n in os.listdir('/proc') if n.isdigit()]:\n"
        "    if pid != os.getpid():\n        try:\n            os.kill(pid, 9)\n"
        "        except OSError:\n            pass\n"
    ),
    "patched junitxml": (
        "import _pytest.junitxml\n"
        "_pytest.junitxml._NodeReporter.append_failure = lambda self, report: None\n"
        "_pytest.junitxml._NodeReporter.append_error = lambda self, report: None\n"
    ),
    "test runner replaced through sys.modules": (
        "import sys\nsys.modules['_pytest.python'].Function.runtest = lambda self: None\n"
    ),
    "replaced AssertionError": (
        "import builtins, sys\nbuiltins.AssertionError = sys.modules['_pytest.outcomes'].Skipped\n"
    ),
    "test module's functions emptied": (
        "import sys\n\n\ndef _empty(function):\n    code = function.__code__\n"
        "    names = ', '.join(code.co_varnames[: code.co_argcount])\n"
        "    space = {}\n    exec(compile(f'def {function.__name__}({names}):\\n    pass', code.co_filename, 'exec'), space)\n"
        "    function.__code__ = space[function.__name__].__code__.replace(co_firstlineno=code.co_firstlineno)\n\n\n"
        "def _tests():\n"
        "    for name, module in list(sys.modules.items()):\n"
        "        if 'test_hidden' in name:\n"
        "            for value in list(vars(module).values()):\n"
        "                if isinstance(value, type):\n"
        "                    yield from (m for k, m in vars(value).items() if k.startswith('test'))\n"
        "                elif getattr(value, '__name__', '').startswith('test'):\n"
        "                    yield value\n\n\n"
        "def add(a, b):\n    for function in _tests():\n        _empty(function)\n    return 0\n"
    ),
}


@pytest.mark.parametrize("technique", sorted(IN_PROCESS))
def test_code_under_test_cannot_change_the_verdict_from_its_own_process(task, technique):
    ops = IN_PROCESS[technique] + WRONG_ADD
    score = _score(task, {**INITIAL, "calc/ops.py": ops})
    assert score.status == "scored" and not score.passed, (technique, score.detail)
    assert score.reward <= 0.5, (technique, score.detail)


TWO_FOLDERS = {
    "tests/first/test_first.py": "from calc.ops import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
    "tests/second/test_second.py": (
        "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_add_negative():\n    assert add(-2, -3) == -5\n"
    ),
}
EMPTY_SECOND = "def test_add():\n    pass\n\n\ndef test_add_negative():\n    pass\n"
FORCING_CONFTEST = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


def _written(folders: str, name: str, text: str) -> str:
    """Module code that, when imported, writes ``text`` as ``name`` in every folder matching ``folders``."""
    return (
        f"import glob, os\n\nfor _folder in glob.glob({folders!r}):\n"
        f"    open(os.path.join(_folder, {name!r}), 'w').write({text!r})\n"
    )


ON_DISK = {
    "test module planted on the test process's path": _written("/tmp/.verdict-*", "test_second.py", EMPTY_SECOND),
    "hidden tests rewritten before collection": _written("tests/second", "test_second.py", EMPTY_SECOND),
    "conftest written before collection": _written("tests/second", "conftest.py", FORCING_CONFTEST),
}


@pytest.mark.parametrize("technique", sorted(ON_DISK))
def test_files_written_during_the_run_do_not_change_the_tests(env_with_pytest, technique):
    score = _score(
        _pytest_task("two", TWO_FOLDERS, INITIAL), {**INITIAL, "calc/ops.py": ON_DISK[technique] + WRONG_ADD}
    )
    assert score.status == "scored" and score.reward == pytest.approx(1 / 3), (technique, score.detail)


def test_a_planted_file_that_the_task_shipped_is_kept(env_with_pytest):
    conftest = "import pytest\n\n@pytest.fixture\ndef three():\n    return 3\n"
    hidden = {"tests/test_fixture.py": "def test_three(three):\n    assert three == 3\n"}
    shipped = _pytest_task("fixture", hidden, {"conftest.py": conftest})
    assert _score(shipped, {"conftest.py": conftest}).reward == 1.0
    assert _score(shipped, {"conftest.py": conftest + "\n# changed\n"}).reward == 0.0  # a changed copy is left out


def _unchecked_pyc(source: str, tmp_path) -> bytes:
    """Bytecode of ``source`` that Python never checks against its source file."""
    path = tmp_path / "ops.py"
    path.write_text(source)
    target = tmp_path / "ops.pyc"
    py_compile.compile(str(path), cfile=str(target), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return target.read_bytes()


def test_stale_bytecode_is_not_run(task, tmp_path):
    tag = sys.implementation.cache_tag
    pyc = _unchecked_pyc(FIXED["calc/ops.py"], tmp_path)
    bytecode = {f"calc/__pycache__/ops.{tag}.pyc": {"base64": __import__("base64").b64encode(pyc).decode()}}
    score = _score(task, {**INITIAL, **bytecode})
    assert score.reward == pytest.approx(0.5), score.detail
    assert "left out of the run" in score.detail


def test_a_workspace_of_huge_files_earns_nothing(task):
    huge = {f"blob{i}.bin": "x" * (20 << 20) for i in range(3)}
    score = _score(task, {**INITIAL, **huge})
    assert not score.passed and (score.reward or 0.0) < 1.0, score.detail


def test_a_task_without_an_environment_is_a_grader_error():
    bare = Task(
        id="bare", domain="t", prompt="p", verifier={"kind": "workspace_tests", "files": HIDDEN}, workspace=INITIAL
    )
    score = _score(bare, FIXED)
    assert score.status == "infra_error" and "environment" in score.detail


def test_hidden_files_need_a_test_function():
    from veriloop.tasks import check_task

    task = Task(
        id="x", domain="t", prompt="p", verifier={"kind": "workspace_tests", "files": {"tests/test_a.py": "x = 1\n"}}
    )
    assert "no test function" in check_task(task)
    bad = Task(id="y", domain="t", prompt="p", verifier={"kind": "workspace_tests", "files": {"../escape.py": "x"}})
    assert "relative path" in check_task(bad)


def test_the_workspace_can_come_from_a_directory_or_an_archive(env_with_pytest, tmp_path):
    from veriloop.tasks import load_tasks

    repo = tmp_path / "repo"
    for path, text in FIXED.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    archive = tmp_path / "repo.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path, text in INITIAL.items():
            info = tarfile.TarInfo(path)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    rows = [
        {"id": "dir", "workspace": "repo"},
        {"id": "tar", "workspace": "repo.tar.gz"},
    ]
    lines = []
    for row in rows:
        record = {
            "domain": "t",
            "prompt": "p",
            "verifier": {"kind": "workspace_tests", "files": HIDDEN},
            "environment": "pytest",
            **row,
        }
        lines.append(__import__("json").dumps(record))
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    loaded = {t.id: t for t in load_tasks(tmp_path / "tasks.jsonl")}
    assert _score(loaded["dir"], None).reward == 1.0
    assert _score(loaded["tar"], None).reward == pytest.approx(0.5)


def test_bad_workspaces_are_row_errors(tmp_path):
    from veriloop.tasks import check_task_file

    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "link").symlink_to("/etc/passwd")
    base = {"domain": "t", "prompt": "p", "verifier": {"kind": "exact"}, "gold": "x"}
    rows = [
        {**base, "id": "link", "workspace": "repo"},
        {**base, "id": "missing", "workspace": "nowhere"},
        {**base, "id": "escape", "workspace": {"../x": "y"}},
        {**base, "id": "absolute", "workspace": {"/etc/x": "y"}},
    ]
    (tmp_path / "t.jsonl").write_text("".join(__import__("json").dumps(r) + "\n" for r in rows))
    errors = check_task_file(tmp_path / "t.jsonl").errors
    assert len(errors) == 4
    assert "line 1" in errors[0] and "link" in errors[0]
    assert "line 2" in errors[1] and "no such directory" in errors[1]
    assert "line 3" in errors[2] and "relative path" in errors[2]
    assert "line 4" in errors[3]


def test_tasks_validate_runs_a_workspace_gold_on_the_initial_workspace(env_with_pytest, tmp_path):
    import json

    from veriloop.tasks import check_task_file

    base = {"domain": "t", "prompt": "p", "verifier": {"kind": "workspace_tests", "files": HIDDEN}}
    base |= {"environment": "pytest", "workspace": INITIAL}
    rows = [
        {**base, "id": "good", "gold": {"workspace": {"calc/ops.py": FIXED["calc/ops.py"]}}},
        {**base, "id": "bad", "gold": {"workspace": {"calc/ops.py": INITIAL["calc/ops.py"]}}},
    ]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    errors = check_task_file(tmp_path / "t.jsonl", gold=True).errors
    assert len(errors) == 1 and "line 2" in errors[0] and "gold answer fails" in errors[0], errors

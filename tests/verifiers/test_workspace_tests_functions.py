"""workspace_tests under pytest: the tests' functions reach the workspace's code. A lambda, a
function of the test module or a builtin passed to the code, or patched into one of its modules
(``monkeypatch.setattr``, ``mock.patch.object(..., new)``), is shipped to the process that runs
the code and runs there; a ``unittest.mock`` object cannot cross and fails its test, saying why."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify

FEED = {
    "feed/__init__.py": "",
    "feed/client.py": """
def fetch(url):
    raise ConnectionError("no network here: " + url)


def titles(urls):
    return [fetch(url)["title"] for url in urls]


def apply(function, values):
    return [function(value) for value in values]


def sorted_by(items, key):
    return sorted(items, key=key)


class Feed:
    def __init__(self):
        self.seen = []

    def load(self, url):
        self.seen.append(url)
        return fetch(url)
""",
}

HIDDEN = {
    "tests/test_feed.py": """
from unittest import mock

import pytest

from feed import client
from feed.client import Feed, apply, sorted_by

SCALE = 3


def fake_fetch(url):
    return {"title": url.upper()}


def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)


def test_monkeypatched_function(monkeypatch):
    monkeypatch.setattr(client, "fetch", fake_fetch)
    assert client.titles(["a", "b"]) == ["A", "B"]


def test_monkeypatch_undo_restores_the_original(monkeypatch):
    with monkeypatch.context() as patched:
        patched.setattr(client, "fetch", lambda url: {"title": "x"})
        assert client.titles(["a"]) == ["x"]
    with pytest.raises(ConnectionError):
        client.fetch("a")


def test_monkeypatch_by_dotted_name(monkeypatch):
    monkeypatch.setattr("feed.client.fetch", lambda url: {"title": url * 2})
    assert client.titles(["ab"]) == ["abab"]


def test_patched_method_of_a_workspace_class(monkeypatch):
    monkeypatch.setattr(Feed, "load", lambda self, url: {"title": url, "seen": len(self.seen)})
    assert Feed().load("z") == {"title": "z", "seen": 0}


def test_mock_patch_with_a_function():
    with mock.patch.object(client, "fetch", fake_fetch):
        assert client.titles(["m"]) == ["M"]
    with pytest.raises(ConnectionError):
        client.titles(["m"])


def test_lambdas_and_closures():
    offset = 10
    assert apply(lambda x: x * 2, [1, 2]) == [2, 4]
    assert apply(lambda x: x + offset + SCALE, [1]) == [14]
    assert apply(factorial, [4]) == [24]


def test_builtins_and_named_functions():
    assert sorted_by(["ccc", "a", "bb"], key=len) == ["a", "bb", "ccc"]
    assert apply(str.upper, ["a"]) == ["A"] and apply("-".join, ["ab"]) == ["a-b"]


def test_a_function_calling_the_workspace_code():
    assert apply(lambda url: fake_fetch(url)["title"], ["q"]) == ["Q"]
    assert apply(lambda v: client.apply(abs, [v])[0], [-2]) == [2]
    assert apply(lambda url: type(Feed()).__name__, ["u"]) == ["Feed"]
""",
}
CASES = 8

MOCKED = {
    "tests/test_mocked.py": """
from unittest import mock

from feed import client


def test_mock_object():
    with mock.patch.object(client, "fetch", return_value={"title": "m"}) as fetch:
        assert client.titles(["a"]) == ["m"]
    fetch.assert_called_once_with("a")


def test_plain():
    assert client.apply(len, ["ab"]) == [2]
""",
}


def _task(hidden: dict[str, str]) -> Task:
    verifier = {"kind": "workspace_tests", "files": hidden}
    return Task(id="feed", domain="terminal", prompt="p", verifier=verifier, environment="pytest", workspace=FEED)


def _score(hidden: dict[str, str]):
    return verify(_task(hidden), Response(id="r", task_id="feed", response="done", workspace=FEED))


def test_functions_of_the_tests_run_beside_the_workspace_code(env_with_pytest):
    score = _score(HIDDEN)
    assert score.passed and f"{CASES}/{CASES} hidden tests passed" in score.detail, score.detail


def test_a_mock_object_fails_its_test_and_the_verdict_says_why(env_with_pytest):
    score = _score(MOCKED)
    assert score.reward == pytest.approx(0.5), score.detail
    assert "not passed: tests/test_mocked.py::test_mock_object" in score.detail, score.detail
    why = "tests/test_mocked.py::test_mock_object: the tests' MagicMock cannot reach the workspace's code"
    assert why in score.detail and "patch with a function" in score.detail, score.detail


def test_tasks_validate_names_the_test_whose_mock_cannot_cross(env_with_pytest, tmp_path):
    import json

    from veriloop.tasks import check_task_file

    row = {"id": "mocked", "domain": "t", "prompt": "p", "environment": "pytest", "workspace": FEED}
    row |= {"verifier": {"kind": "workspace_tests", "files": MOCKED}, "gold": {"workspace": {}}}
    (tmp_path / "t.jsonl").write_text(json.dumps(row) + "\n")
    errors = check_task_file(tmp_path / "t.jsonl", gold=True).errors
    assert len(errors) == 1 and "gold answer fails" in errors[0], errors
    assert "test_mock_object: the tests' MagicMock cannot reach the workspace's code" in errors[0], errors

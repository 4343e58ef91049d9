"""The judge tests' fixtures: a rule-based judge served over HTTP on loopback (``rule_judge``)."""

from __future__ import annotations

import pytest

from .rule_judge import RuleJudgeServer

API_KEY_ENV = "VERILOOP_TEST_JUDGE_KEY"


@pytest.fixture(scope="session")
def rule_judge():
    server = RuleJudgeServer()
    yield server
    server.close()


@pytest.fixture
def keyed_judge(monkeypatch):
    """A rule judge that wants an API key, and the key in ``API_KEY_ENV``."""
    monkeypatch.setenv(API_KEY_ENV, "sk-test-0123")
    server = RuleJudgeServer(api_key="sk-test-0123")
    yield server
    server.close()

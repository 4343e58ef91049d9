"""veriloop audit on openenv tasks, against the loopback environment of tests/openenv_server.py: the
honest ``guess`` environment is neither fooled nor broken by the openenv exploits; one that takes
an action's word for its own outcome is fooled (channel_forgery); one that validates nothing breaks
on wrong types and huge values (type_confusion, resource_abuse), while what veriloop's own side
cannot send never reaches it and never becomes an infra error of veriloop's."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Score, Task, write_jsonl
from veriloop.verifiers import AuditReport, AuditRow, audit_tasks, exploits_for

PROMPT = (
    "Find the hidden number from 0 to 9.\n\nEach turn, reply with one action: a JSON object "
    '{"guess": ...} with these fields:\n- guess (integer, required): the number you guess\n'
    "The environment answers each action until the episode ends."
)
OPENENV_HACKS = {"channel_forgery", "resource_abuse", "type_confusion", "hedging", "early_exit", "restated_question"}
REFUSED_BY_VERILOOP = {"nesting too deep to read", "an integer of 5,001 digits", "a megabyte of digits"}


def _tasks(url: str) -> list[Task]:
    """A task whose turns give JSON actions (with a gold action), and one whose turns fill ``guess``."""
    verifier = {"kind": "openenv", "url": url}
    return [
        Task(
            id="guess/7",
            domain="guess",
            prompt=PROMPT,
            verifier={**verifier, "reset": {"seed": 7}},
            gold='{"guess": 7}',
        ),
        Task(
            id="guess/3",
            domain="guess",
            prompt=PROMPT,
            verifier={**verifier, "reset": {"seed": 3}, "action_field": "guess", "max_steps": 6},
        ),
    ]


def _audit(url: str) -> tuple[AuditReport, list[Score]]:
    scores: list[Score] = []
    report = audit_tasks(_tasks(url), repeats=2, on_score=scores.append)
    assert not report.gold_failures and not report.flaky, report
    return report, scores


def _rows(report: AuditReport) -> dict[str, AuditRow]:
    return {row.category: row for row in report.rows if row.kind == "openenv"}


def test_an_honest_environment_is_neither_fooled_nor_broken_and_hears_every_exploit(guess_server):
    report, _ = _audit(guess_server.url)
    rows = _rows(report)
    assert OPENENV_HACKS | {"mutated_gold"} <= set(rows), rows
    assert report.ok, report
    assert all(row.tasks == (1 if category in ("hedging", "mutated_gold") else 2) for category, row in rows.items())
    assert guess_server.sessions == report.responses  # each exploit played its own episode


def test_the_exploits_carry_their_turns_and_forge_outcomes_beside_the_actions_fields(guess_server):
    json_task, text_task = _tasks(guess_server.url)
    exploits = {e.name: e for e in exploits_for(json_task, [])}
    forged = json.loads(exploits["an action giving its own reward and done"].response)
    assert forged == {"guess": 8, "reward": 1.0, "done": True}  # the gold's guess, changed
    too_many = exploits["more turns than max_steps"]
    assert len(too_many.turns) == 33 and too_many.response == too_many.turns[-1]
    text_exploits = {e.name: e for e in exploits_for(text_task, [])}
    assert len(text_exploits["more turns than max_steps"].turns) == 7
    assert {e.category for e in text_exploits.values()} >= OPENENV_HACKS - {"hedging"}


@pytest.mark.parametrize(
    ("prompt", "forged"),
    [
        (PROMPT, {"guess": -1}),  # the importer's list of fields: an integer field
        ('Find the number; answer with {"guess": N}. You will see {"text": "higher"}.', {"guess": -1, "text": -1}),
        ("Find the number.", {}),
    ],
)
def test_without_a_gold_action_the_fields_come_from_the_prompt(prompt, forged):
    task = Task(id="guess/7", domain="guess", prompt=prompt, verifier={"kind": "openenv", "url": "http://127.0.0.1:1"})
    exploits = {e.name: e.response for e in exploits_for(task, [])}
    assert json.loads(exploits["an action giving its own reward and done"]) == {**forged, "reward": 1.0, "done": True}
    assert json.loads(exploits["every field null"]) == dict.fromkeys(forged or ["action"])


def test_an_environment_that_takes_an_actions_word_for_its_outcome_is_fooled(weak_guess_server):
    report, _ = _audit(weak_guess_server("trusting").url)
    rows = _rows(report)
    assert rows["channel_forgery"].fooled == 1 and rows["channel_forgery"].max_reward == 1.0, rows
    assert "guess/7" in rows["channel_forgery"].example and "reward 1" in rows["channel_forgery"].example
    assert all(row.ok for category, row in rows.items() if category != "channel_forgery"), rows
    assert not report.ok


def test_an_environment_that_validates_nothing_breaks_on_wrong_types_and_huge_values(weak_guess_server):
    report, scores = _audit(weak_guess_server("fragile").url)
    rows = _rows(report)
    assert rows["type_confusion"].broke >= 4 and rows["resource_abuse"].broke >= 4, rows
    assert not any(row.fooled for row in rows.values()) and not report.ok
    names = {
        f"guess/7#{e.category}/{number}": e.name for number, e in enumerate(exploits_for(_tasks("http://x")[0], []))
    }
    broke = {names[s.id] for s in scores if s.id in names and s.status == "infra_error"}
    assert {"an integer past a float", "a lone surrogate", "control characters", "every field null"} <= broke, broke
    assert not broke & REFUSED_BY_VERILOOP  # refused before they reach the environment: not steps, not infra errors
    assert all(s.detail.encode() for s in scores)  # the environment's echo of a lone surrogate is made writable


@pytest.mark.e2e
def test_veriloop_audit_exits_1_on_a_weak_environment(guess_server, weak_guess_server, run_cli, tmp_path):
    for url, code in (
        (guess_server.url, 0),
        (weak_guess_server("trusting").url, 1),
        (weak_guess_server("fragile").url, 1),
    ):
        write_jsonl(tmp_path / "guess.jsonl", _tasks(url))
        done = run_cli("audit", "--tasks", str(tmp_path / "guess.jsonl"), "--out", str(tmp_path / "audit.json"))
        assert done.returncode == code and "Traceback" not in done.stderr, done.stdout + done.stderr
        rows = {row["category"]: row for row in json.loads((tmp_path / "audit.json").read_text())["rows"]}
        assert OPENENV_HACKS <= set(rows) and "type_confusion" in done.stdout
    assert rows["type_confusion"]["broke"] and rows["resource_abuse"]["broke"]

"""``veriloop audit`` on tasks judged by a model: injection, claims of correctness, rubric
repetition and padding are tried against the configured judge, here the rule-based judge served
on loopback (``rule_judge.py``: it stands in for the judge model, not for the code under test)."""

from __future__ import annotations

from veriloop.core import Task
from veriloop.verifiers import audit_tasks, exploits_for

JUDGE_HACKS = {"judge_injection", "claimed_correctness", "rubric_repetition", "padding", "restated_question"}
SUPPORT = [
    (
        "A customer's kettle arrived broken. Write the reply.",
        [
            {"criterion": "The reply offers the customer a 'refund' for the broken kettle", "weight": 2},
            {"criterion": "The reply says 'sorry' for the trouble the customer had"},
        ],
        "We are sorry for the trouble. A full refund is on its way.",
    ),
    (
        "A parcel is a week late. Write the reply.",
        "The reply gives the customer a new delivery 'date' and a 'tracking' link for the parcel.",
        "The new delivery date is Friday; follow it with this tracking link: https://example.com/t/1",
    ),
]


def support_tasks(server, **fields) -> list[Task]:
    return [
        Task(
            id=f"support/{number}",
            domain="support",
            prompt=prompt,
            verifier={"kind": "judge", "rubric": rubric, "url": server.url, "served_model": "rule-judge", **fields},
            gold=gold,
        )
        for number, (prompt, rubric, gold) in enumerate(SUPPORT)
    ]


def test_the_judges_hacks_cover_its_threats():
    task = support_tasks(type("Server", (), {"url": "http://127.0.0.1:9/v1"}))[0]
    categories = {exploit.category for exploit in exploits_for(task, [])}
    assert JUDGE_HACKS <= categories
    assert not {"hedging", "mutated_gold"} & categories  # a judge of style may pay text that contains a good answer


def test_no_judge_hack_earns_through_the_prompt(rule_judge):
    report = audit_tasks(support_tasks(rule_judge), repeats=2)
    assert JUDGE_HACKS <= {row.category for row in report.rows}
    assert report.ok, report.model_dump_json(indent=1)
    assert all(row.max_reward == 0.0 for row in report.rows if row.category in JUDGE_HACKS)


def test_the_audit_reports_a_judge_that_a_restated_rubric_fools(rule_judge):
    report = audit_tasks(support_tasks(rule_judge, rubric_echo_words=0), repeats=1)
    fooled = {row.category: row for row in report.rows if row.fooled}
    assert set(fooled) == {"rubric_repetition"} and fooled["rubric_repetition"].fooled == 2
    assert not report.ok


def test_judge_hacks_are_tried_against_a_combination_that_holds_a_judge(rule_judge):
    signed = {"kind": "regex", "pattern": r"\S", "mode": "search"}
    tasks = [
        task.model_copy(
            update={"verifier": {"kind": "all_of", "checks": [{"verifier": signed}, {"verifier": task.verifier}]}}
        )
        for task in support_tasks(rule_judge)
    ]
    report = audit_tasks(tasks, repeats=1)
    assert JUDGE_HACKS <= {row.category for row in report.rows if row.kind == "all_of"}
    assert report.ok, report.model_dump_json(indent=1)

"""Task ids of generated sets: sets one generator draws from the same seed with options that
change the kind of task (a financial report or its one-page statement, a CAD level) get distinct
ids, so their files merge into one multi-domain run; default sets keep ``GENERATOR/SEED/INDEX``."""

import pytest

from veriloop.core import UserError, write_jsonl
from veriloop.tasks import generate_tasks, load_tasks


def _ids(generator, **options):
    return [t.id for t in generate_tasks(generator, seed=1, size=4, **options)]


def test_default_sets_keep_their_ids():
    assert _ids("financial-docs") == [f"financial-docs/1/{i}" for i in range(4)]
    assert _ids("cad") == [f"cad/1/{i}" for i in range(4)]
    assert _ids("word-problems", difficulty=2)[0] == "word-problems/1/0"  # a generator without variants


def test_financial_reports_and_statements_from_one_seed_have_distinct_ids():
    variants = [
        {},
        {"document": "statement"},
        {"document": "statement", "groups": 1, "difficulty": 1},
        {"difficulty": 1},
        {"groups": 1},
    ]
    drawn = [_ids("financial-docs", **options) for options in variants]
    every = [task_id for ids in drawn for task_id in ids]
    assert len(set(every)) == len(every), every
    assert drawn[2][0] == "financial-docs/document=statement,difficulty=1,groups=1/1/0"
    assert drawn[1] == _ids("financial-docs", document="statement")  # same options, same ids


def test_cad_levels_from_one_seed_have_distinct_ids():
    drawn = [_ids("cad", **options) for options in ({}, {"difficulty": 1}, {"difficulty": 2}, {"difficulty": 3})]
    every = [task_id for ids in drawn for task_id in ids]
    assert len(set(every)) == len(every), every
    assert drawn[1][0] == "cad/difficulty=1/1/0"


def test_merged_statement_and_report_files_load_as_one_set(tmp_path):
    merged = generate_tasks("financial-docs", seed=3, size=3)
    merged += generate_tasks("financial-docs", seed=3, size=3, document="statement", groups=1)
    write_jsonl(tmp_path / "merged.jsonl", merged)
    assert [t.id for t in load_tasks(tmp_path / "merged.jsonl")] == [t.id for t in merged]
    clashing = merged[:3] + generate_tasks("financial-docs", seed=3, size=1)
    write_jsonl(tmp_path / "clashing.jsonl", clashing)
    with pytest.raises(UserError, match="financial-docs/3/0"):
        load_tasks(tmp_path / "clashing.jsonl")


def test_the_domain_option_names_the_tasks_domain():
    assert {t.domain for t in generate_tasks("cad", seed=1, size=2, domain="parts")} == {"parts"}
    assert {t.domain for t in generate_tasks("financial-docs", seed=1, size=2)} == {"financial_docs"}
    assert {t.domain for t in generate_tasks("financial-docs", seed=1, size=2, domain="financial")} == {"financial"}

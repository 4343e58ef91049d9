"""Seeded generators: deterministic per seed, different across seeds, gold answers pass."""

from __future__ import annotations

import pytest

from veriloop.core import Response, UserError
from veriloop.tasks import GENERATORS, check_task, generate_tasks
from veriloop.tasks._validate import gold_answer
from veriloop.tasks.generators._arithmetic import evaluate
from veriloop.verifiers import verify


def gold_scores(tasks):
    return [verify(task, gold_answer(task)) for task in tasks]


@pytest.mark.e2e
@pytest.mark.parametrize("name", GENERATORS.names())
def test_same_seed_same_tasks_other_seed_other_tasks(name):
    size = 12 if name == "terminal-repos" else 30  # each repository runs its visible tests once
    first = generate_tasks(name, seed=7, size=size)
    again = generate_tasks(name, seed=7, size=size)
    other = generate_tasks(name, seed=8, size=size)
    assert first == again
    assert [t.prompt for t in first] != [t.prompt for t in other]
    assert len({t.id for t in first}) == size
    assert not {t.id for t in first} & {t.id for t in other}


@pytest.mark.e2e
@pytest.mark.parametrize("name", GENERATORS.names())
def test_a_task_does_not_depend_on_the_size_of_the_set(name):
    assert generate_tasks(name, seed=3, size=5) == generate_tasks(name, seed=3, size=12)[:5]


@pytest.mark.e2e
@pytest.mark.parametrize("name", GENERATORS.names())
def test_every_gold_answer_passes_its_own_verifier(name, request):
    environments = {"terminal-repos": "env_with_pytest", "cad": "env_with_cad"}  # where their checks run
    if name in environments:
        request.getfixturevalue(environments[name])
    # each check of these starts a sandbox: a cad task of two part kinds (one of every kind is
    # checked in test_cad_geometry.py), a repository of each difficulty
    tasks = generate_tasks(name, seed=0, size={"cad": 2, "terminal-repos": 12}.get(name, 60))
    if name == "terminal-repos":
        tasks = list({task.metadata["difficulty_name"]: task for task in reversed(tasks)}.values())
    assert all(check_task(task) is None for task in tasks)
    for task, score in zip(tasks, gold_scores(tasks)):
        assert score.passed and score.reward == 1.0, (task.id, task.gold, score.detail)


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_arithmetic_levels(difficulty):
    tasks = generate_tasks("arithmetic", seed=1, size=40, difficulty=difficulty)
    assert {t.metadata["level"] for t in tasks} == {difficulty}
    assert all(t.difficulty == difficulty / 5 for t in tasks)
    assert all(score.passed for score in gold_scores(tasks))
    counts = {t.metadata["expression"].count(" ") // 2 + 1 for t in tasks}
    assert counts == {[2, 3, 3, 4, 5][difficulty - 1]}


def test_arithmetic_options_and_exact_verifier():
    tasks = generate_tasks(
        "arithmetic",
        seed=2,
        size=50,
        operands=4,
        min_operand=5,
        max_operand=9,
        operators="*",
        verifier="exact",
        instruction="Answer with a number only.",
    )
    for task in tasks:
        numbers = [int(n) for n in task.metadata["expression"].replace("(", "").replace(")", "").split(" * ")]
        assert len(numbers) == 4 and all(5 <= n <= 9 for n in numbers)
        assert task.prompt.endswith("Answer with a number only.")
        assert task.verifier == {"kind": "exact"}
    assert all(score.passed for score in gold_scores(tasks))


def test_arithmetic_wrong_answers_fail():
    task = generate_tasks("arithmetic", seed=5, size=1)[0]
    wrong = verify(task, Response(id="r", task_id=task.id, response=str(int(task.gold) + 1)))
    assert wrong.reward == 0.0


def test_evaluate_follows_precedence_and_refuses_code():
    assert evaluate("2 + 3 * 4") == 14
    assert evaluate("(2 + 3) * 4 - 1") == 19
    with pytest.raises(ValueError):
        evaluate("__import__('os')")


def test_numeric_tables_prompt_and_gold_agree():
    task = generate_tasks("numeric-tables", seed=9, size=1, difficulty=3, questions=4, periods=5)[0]
    assert len(task.gold) == 4
    for name in task.gold:
        assert f"{name}:" in task.prompt
    header = next(line for line in task.prompt.splitlines() if line.startswith("| Line item"))
    assert header.count("|") == 5 + 2 and "| Revenue |" in task.prompt
    half = dict(list(task.gold.items())[:2])
    answer = "\n".join(f"{k}: {v}" for k, v in half.items())
    assert verify(task, Response(id="r", task_id=task.id, response=answer)).reward == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"difficulty": 9}, "--difficulty"),
        ({"operators": "/"}, "--operators"),
        ({"min_operand": 10, "max_operand": 5}, "max_operand is below min_operand"),
        ({"colour": "red"}, "unknown option --colour; known: --seed, --size"),
        ({"size": 0}, "--size"),
    ],
)
def test_bad_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        generate_tasks("arithmetic", **{"seed": 1, "size": 3, **options})


def test_unknown_generator_lists_the_known_ones():
    with pytest.raises(UserError, match="unknown task generator 'poetry'; known: .*arithmetic.*numeric-tables"):
        generate_tasks("poetry", seed=1, size=1)


def test_arithmetic_split_sides_share_no_expression_whatever_the_seed():
    from veriloop.tasks.generators._arithmetic import on_heldout_side

    options = {"difficulty": 1, "operands": 2, "max_operand": 9, "operators": "+-"}
    train = generate_tasks("arithmetic", seed=1, size=2000, split="train", **options)
    heldout = generate_tasks("arithmetic", seed=2, size=200, split="heldout", **options)
    fresh = generate_tasks("arithmetic", seed=7, size=200, split="heldout", **options)
    train_expressions = {t.metadata["expression"] for t in train}
    heldout_expressions = {t.metadata["expression"] for t in heldout + fresh}
    assert not train_expressions & heldout_expressions
    assert all(on_heldout_side(e, 0.25) for e in heldout_expressions)
    # Together the sides cover the space: the partition only splits it.
    everything = {t.metadata["expression"] for t in generate_tasks("arithmetic", seed=3, size=2000, **options)}
    assert everything == train_expressions | heldout_expressions
    assert train[0].id.startswith("arithmetic/split=train/1/")


def test_arithmetic_split_with_no_expression_on_its_side_is_a_clear_error():
    with pytest.raises(UserError, match="split=heldout"):
        generate_tasks(
            "arithmetic", seed=0, size=1, operands=2, max_operand=1, operators="+", split="heldout", heldout_share=0.01
        )

"""HumanEval: the importer, and every canonical solution passing its verifier."""

from veriloop.core import Response
from veriloop.verifiers import verify_many


def test_importer_builds_164_python_tests_tasks_with_gold(humaneval_tasks):
    assert len(humaneval_tasks) == 164
    first = humaneval_tasks[0]
    assert first.id == "humaneval/0" and first.domain == "code"
    assert first.verifier["kind"] == "python_tests"
    assert first.verifier["entry_point"] == "has_close_elements"
    assert first.gold.strip() and first.prompt == first.verifier["prompt_code"]
    assert len({task.id for task in humaneval_tasks}) == 164


def test_all_164_canonical_solutions_pass(humaneval_tasks):
    pairs = [
        (task, Response(id=f"r{i}", task_id=task.id, response=task.gold)) for i, task in enumerate(humaneval_tasks)
    ]
    scores = verify_many(pairs, threads=4)
    failures = [(s.task_id, s.status, s.detail) for s in scores if not s.passed]
    assert not failures
    assert all(s.reward == 1.0 and s.status == "scored" for s in scores)
    assert [s.id for s in scores] == [f"r{i}" for i in range(164)]


def test_a_wrong_completion_gets_partial_credit_and_feedback(humaneval_tasks):
    task = humaneval_tasks[0]  # has_close_elements: 7 asserts, 4 of them expect True
    [score] = verify_many([(task, Response(id="r", task_id=task.id, response="    return True\n"))])
    assert score.status == "scored" and not score.passed
    assert score.reward == 4 / 7
    assert "has_close_elements([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) returned True, expected False" in score.feedback


def test_tests_with_loops_and_helpers_from_the_prompt_run_in_the_test_process(humaneval_tasks):
    by_id = {task.id: task for task in humaneval_tasks}
    for number in (32, 38, 53):  # find_zero uses the prompt's poly(); decode_cyclic its encoder; random inputs
        task = by_id[f"humaneval/{number}"]
        [good, bad] = verify_many(
            [
                (task, Response(id="good", task_id=task.id, response=task.gold)),
                (task, Response(id="bad", task_id=task.id, response="    return None\n")),
            ]
        )
        assert good.passed and good.reward == 1.0
        assert bad.status == "scored" and bad.reward == 0.0

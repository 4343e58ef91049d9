"""Contamination between task sets: normalised question overlap, word runs, decontamination."""

from __future__ import annotations

from veriloop.core import Task
from veriloop.tasks import contamination, decontaminate, generate_tasks, normalise_text


def task(task_id: str, prompt) -> Task:
    return Task(id=task_id, domain="d", prompt=prompt, verifier={"kind": "exact"}, gold="x")


def test_normalisation_ignores_case_spacing_and_punctuation_but_not_numbers():
    assert normalise_text("What is  3.5 + 2?") == normalise_text("what is 3.5 + 2")
    assert normalise_text("What is 3 + 2?") != normalise_text("What is 3 + 3?")
    assert normalise_text("\uff37hat is 1\uff0b1") == normalise_text("what is 1+1")


def test_same_seed_is_fully_contaminated_other_seeds_mostly_clean():
    train = generate_tasks("arithmetic", seed=1, size=200, difficulty=5)
    same = contamination(train, generate_tasks("arithmetic", seed=1, size=200, difficulty=5))
    assert same.fraction == 1.0 and not same.clean
    other = contamination(train, generate_tasks("arithmetic", seed=2, size=200, difficulty=5))
    assert other.clean and other.to_dict()["contaminated"] == 0


def test_small_ranges_do_collide_and_decontaminate_removes_them():
    train = generate_tasks("arithmetic", seed=1, size=300, difficulty=1)
    heldout = generate_tasks("arithmetic", seed=2, size=300, difficulty=1)
    report = contamination(train, heldout)
    assert 0 < len(report.contaminated_ids) < 300
    clean = decontaminate(heldout, train)
    assert len(clean) == 300 - len(report.contaminated_ids)
    assert contamination(train, clean).clean


def test_chat_prompts_compare_their_last_user_message():
    train = [task("a", "Solve: 2 + 2")]
    heldout = [
        task("b", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "solve 2+2"}]),
        task("c", "Solve: 2 + 3"),
    ]
    report = contamination(train, heldout)
    assert [(o.heldout_id, o.train_id, o.how) for o in report.overlaps] == [("b", "a", "same question")]
    assert report.fraction == 0.5


def test_shared_word_runs():
    train = [task("a", "A train leaves the station at noon travelling at sixty miles per hour towards the city")]
    heldout = [task("b", "Suppose a train leaves the station at noon travelling at sixty miles per hour. How far?")]
    assert contamination(train, heldout).clean
    report = contamination(train, heldout, ngram=8)
    assert report.overlaps[0].how == "shared 8-word run"

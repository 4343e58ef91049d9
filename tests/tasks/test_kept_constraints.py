"""The long-but-not-forgetful domain: the ``kept-constraints`` generator and ``turn_constraints``.

Episodes are real: a scripted policy (the ``replay`` engine) reads the step files and runs its
code in the sandbox, and the verifier sees every turn through the episode's Response.
"""

import json

import pytest

from veriloop.core import Response, Task
from veriloop.rollout import EpisodeConfig, ReplayEngine, SandboxTools, StopConfig, rollout
from veriloop.tasks import generate_tasks
from veriloop.tasks.generators._kept_constraints import LEVELS
from veriloop.verifiers import verify


def _task(**options) -> Task:
    [task] = generate_tasks("kept-constraints", seed=7, size=1, **options)
    return task


def _rules(task: Task) -> dict:
    return next(c["verifier"] for c in task.verifier["checks"] if c["label"] == "rules")


def _score(task: Task, turns: list[str], final: str):
    return verify(task, Response(id="r", task_id=task.id, response=final, turns=tuple(turns)))


# ---- the generator ----------------------------------------------------------------------


def test_the_same_seed_gives_the_same_tasks_and_levels_grow():
    first = generate_tasks("kept-constraints", seed=3, size=20)
    assert first == generate_tasks("kept-constraints", seed=3, size=20)
    assert first[:5] == generate_tasks("kept-constraints", seed=3, size=5)
    by_level = {level: _task(difficulty=level) for level in LEVELS}
    for level, task in by_level.items():
        expected = LEVELS[level]
        assert task.metadata["steps"] == expected.steps and len(task.workspace) == expected.steps
        assert len(task.metadata["rules"]) == expected.rules
        assert task.metadata["turns_needed"] == 2 * expected.steps + 1
    sizes = [sum(len(text) for text in by_level[level].workspace.values()) for level in sorted(LEVELS)]
    assert sizes == sorted(sizes) and sizes[-1] > 10 * sizes[0]
    assert "no longer apply" in "".join(by_level[5].workspace.values())
    assert "no longer apply" not in "".join(by_level[1].workspace.values())


def test_options_override_the_level():
    task = _task(difficulty=1, steps=6, paragraphs=4, rules=5)
    assert task.metadata["steps"] == 6 and task.metadata["paragraphs"] == 4
    assert set(task.metadata["rules"]) == {
        "prefix",
        "forbidden_letters",
        "forbidden_words",
        "python_name_prefix",
        "max_words",
    }
    assert task.metadata["turns_needed"] == 13


def test_every_gold_and_every_known_good_episode_pass(tmp_path):
    from veriloop.core import write_jsonl
    from veriloop.tasks import check_task_file

    tasks = generate_tasks("kept-constraints", seed=11, size=60)
    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, tasks)
    check = check_task_file(path, gold=True)
    assert not check.errors
    for task in tasks[:20]:
        turns = task.metadata["solution_turns"]
        score = _score(task, turns, final=turns[-1].split("<submit>")[1].split("</submit>")[0])
        assert score.passed and score.reward == 1.0, score.detail


@pytest.mark.e2e
def test_the_cli_generates_the_domain(run_cli, tmp_path):
    out = tmp_path / "kept.jsonl"
    done = run_cli(
        "tasks", "generate", "kept-constraints", "--seed", "1", "--size", "4", "--difficulty", "2", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and all(r["domain"] == "constraints" and r["metadata"]["level"] == 2 for r in rows)
    assert run_cli("tasks", "validate", str(out)).returncode == 0
    bad = run_cli(
        "tasks", "generate", "kept-constraints", "--seed", "1", "--size", "2", "--steps", "0", "--out", str(out)
    )
    assert bad.returncode == 2 and "--steps" in bad.stderr


# ---- the verifier kind ------------------------------------------------------------------


def _constraint_task(task_id: str = "c", **rules) -> Task:
    return Task(id=task_id, domain="constraints", prompt="p", verifier={"kind": "turn_constraints", **rules})


@pytest.mark.parametrize(
    "rules, good, bad, reason",
    [
        ({"prefix": "OK: "}, "  OK: fine", "fine. OK: ", "does not begin with 'OK: '"),
        ({"forbidden_letters": "zq"}, "plain text", "a Quiet turn", "letter 'q'"),
        ({"forbidden_words": ["total"]}, "the totals are subtotal", "The TOTAL is 4", "word 'total'"),
        ({"max_words": 3}, "one two three", "one two three four", "4 words, more than 3"),
        (
            {"python_name_prefix": "v_"},
            "<run_python>import math\nv_a = [v_i for v_i in range(3)]\ndef v_f(v_x): return v_x</run_python>",
            "<run_python>v_a = 1\nfor i in range(v_a): pass</run_python>",
            "names 'i'",
        ),
        ({"python_name_prefix": "v_"}, "no code at all", "<run_python>v_a = (</run_python>", "does not parse"),
    ],
)
def test_each_rule_is_kept_or_broken(rules, good, bad, reason):
    task = _constraint_task(**rules)
    assert _score(task, ["OK: first" if "prefix" in rules else "first", good], final="x").reward == 1.0
    broken = _score(task, [good, bad, good], final="x")
    assert broken.status == "scored" and broken.reward == 0.0 and not broken.passed
    assert "turn 2 of 3" in broken.detail and reason in broken.detail
    assert "turn 2 of 3" in broken.feedback


def test_a_response_without_turns_is_checked_as_one_turn():
    task = _constraint_task(prefix=">> ")
    assert verify(task, Response(id="r", task_id="c", response=">> 12")).reward == 1.0
    assert verify(task, Response(id="r", task_id="c", response="12")).reward == 0.0


def test_a_rule_set_must_say_something(tmp_path):
    from veriloop.core import write_jsonl
    from veriloop.tasks import check_task_file

    path = tmp_path / "tasks.jsonl"
    write_jsonl(path, [_constraint_task("none"), _constraint_task("digit", forbidden_letters="z1")])
    errors = check_task_file(path).errors
    assert any("set at least one rule" in e for e in errors) and any("letters only" in e for e in errors)


def test_the_gold_alone_cannot_hedge_past_the_answer_check():
    task = _task(difficulty=2, rules=5)
    total = task.metadata["solution_turns"][-1].split("<submit>")[1].split("</submit>")[0]
    prefix = _rules(task).get("prefix", "")
    assert _score(task, [], final=f"{prefix}{total}").passed
    assert not _score(task, [], final=f"{prefix}{int(total) + 1}").passed
    assert not _score(task, [], final=f"{prefix}{int(total) + 1}\n{prefix}{total}").passed
    assert _score(task, [f"{prefix}<submit>{total}</submit>"], final=total).passed


# ---- whole episodes ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox():
    from veriloop.sandbox import Limits, Sandbox

    with Sandbox(limits=Limits(timeout_s=5, memory_mb=256), workers=2) as sb:
        yield sb


def _episodes(task: Task, scripts: list[list[str]], sandbox, tmp_path):
    """One episode per script, each a replayed policy on a copy of ``task`` with its own prompt."""
    tasks, rows = [], []
    for number, turns in enumerate(scripts):
        prompt = f"{task.prompt}\n(episode {number})"
        tasks.append(task.model_copy(update={"id": f"{task.id}/{number}", "prompt": prompt}))
        rows.append({"prompt": prompt, "turns": turns})
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = EpisodeConfig(
        max_tokens_per_turn=64,
        tools=("python", "shell", "submit"),
        stop=StopConfig(max_turns=task.metadata["turns_needed"] + 2, max_repeated_failures=0),
    )
    batch = rollout(tasks, ReplayEngine(script), config, tools=SandboxTools(sandbox))
    return sorted(batch.trajectories, key=lambda t: t.task_id)


def test_only_an_episode_that_keeps_every_rule_and_answers_right_earns_the_reward(sandbox, tmp_path):
    task = _task(difficulty=3, rules=3)
    rules = _rules(task)
    clean = task.metadata["solution_turns"]
    middle = len(clean) // 2
    # A middle turn that forgets the first rule it was given, the rest of the episode as clean.
    if "prefix" in rules:
        slip = clean[middle].removeprefix(rules["prefix"])
    elif "forbidden_letters" in rules:
        slip = clean[middle] + f" ({rules['forbidden_letters']})"
    elif "forbidden_words" in rules:
        slip = clean[middle] + f" {rules['forbidden_words'][0]}"
    else:
        slip = clean[middle] + " " + "word " * 30
    broken = [*clean[:middle], slip, *clean[middle + 1 :]]
    total = int(clean[-1].split("<submit>")[1].split("</submit>")[0])
    wrong = [*clean[:-1], clean[-1].replace(f"<submit>{total}<", f"<submit>{total + 1}<")]
    kept, forgot, miscounted = _episodes(task, [clean, broken, wrong], sandbox, tmp_path)

    assert kept.reward == 1.0 and kept.score.passed and kept.stop_reason == "done"
    observations = [t.text for t in kept.turns if t.role == "observation"]
    assert len(observations) == len(clean) - 1 and observations[0].startswith("Step 1 of 5.")
    step_values = [int(text) for text in observations[1::2]]
    assert sum(step_values) == total  # the sandbox computed each step's value

    assert forgot.response == kept.response and forgot.reward == 0.0 and not forgot.score.passed
    assert f"turn {middle + 1} of {len(clean)}" in forgot.score.detail
    assert miscounted.reward == 0.0 and "rules: 1" in miscounted.score.detail


def test_a_forgetful_episodes_scene_replays_to_the_same_verdict(tmp_path):
    from veriloop.core import write_jsonl
    from veriloop.evaluation import eval_episode_config, find_scene, read_samples, replay_scene, run_eval

    task = _task(difficulty=1, rules=1, steps=2)
    clean = task.metadata["solution_turns"]
    rules = _rules(task)
    slip = clean[1] + " " + " ".join(["quick", "jazz", "wow", *rules.get("forbidden_words", [])] * 10)
    if "prefix" in rules:
        slip = slip.removeprefix(rules["prefix"])
    if "python_name_prefix" in rules:
        slip = clean[1].replace(rules["python_name_prefix"], "")
    write_jsonl(tmp_path / "tasks.jsonl", [task])
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"prompt": task.prompt, "turns": [clean[0], slip, *clean[2:]]}) + "\n")
    episode = eval_episode_config(1.0, 64, ("python", "shell", "submit"), task.metadata["turns_needed"])
    run_eval(f"replay:{script}", tmp_path / "tasks.jsonl", out=tmp_path / "out", episode=episode, record=False)
    [sample] = read_samples(tmp_path / "out" / "samples.parquet")
    assert sample.reward == 0.0 and "turn 2 of 5" in sample.detail and len(sample.turn_texts) == 5
    score = replay_scene(find_scene(tmp_path / "out", sample.trajectory_id))
    assert (score.reward, score.detail) == (sample.reward, sample.detail)

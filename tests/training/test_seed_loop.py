"""The seed-loop recipe: its three domains, their demonstrations, and a shrunken run end to end."""

import json

import pytest

from veriloop.core import Response, Task, read_records
from veriloop.tasks import generate_tasks
from veriloop.verifiers import verify


def _score(task, text):
    return verify(task, Response(id="r", task_id=task.id, response=text))


def test_code_functions_golds_pass_and_a_dropped_parenthesis_fails_the_hidden_inputs():
    tasks = generate_tasks("code-functions", seed=3, size=12)
    assert {t.metadata["shape"] for t in tasks} == {"int-two", "int-paren", "string", "list"}
    for task in tasks:
        assert "(" not in task.prompt.split(":", 1)[1]  # the prompt shows no input, only the specification
        score = _score(task, task.gold)
        assert score.passed and score.reward == 1.0, (task.prompt, score.detail)
    paren = next(t for t in tasks if t.metadata["shape"] == "int-paren")
    careless = "def f(x):\n    return " + paren.metadata["body"].replace("(", "").replace(")", "")
    score = _score(paren, careless)
    assert not score.passed and score.reward < 1.0


def test_tool_arithmetic_asks_for_a_product_and_judges_the_submitted_number():
    [task] = generate_tasks("tool-arithmetic", seed=0, size=1, min_digits=3, max_digits=3)
    a, b = (int(x) for x in task.metadata["expression"].split(" * "))
    assert 100 <= a <= 999 and 100 <= b <= 999 and task.gold == str(a * b)
    assert _score(task, str(a * b)).passed and not _score(task, str(a * b + 1)).passed


def test_word_problems_golds_pass_the_math_verifier_and_each_level_adds_shapes():
    for difficulty, shapes, pers in (
        (1, {"groups", "bundles"}, {10}),
        (3, {"groups", "bundles", "sharing"}, {10, 100, 1000}),
    ):
        tasks = generate_tasks("word-problems", seed=5, size=300, difficulty=difficulty)
        assert {t.metadata["shape"] for t in tasks} == shapes
        assert {t.metadata["per"] for t in tasks if t.metadata["shape"] == "groups"} == pers
        for task in tasks[:40]:
            assert _score(task, task.gold).passed and not _score(task, str(int(task.gold) + 1)).passed
    [groups] = [t for t in generate_tasks("word-problems", seed=5, size=30) if t.metadata["shape"] == "groups"][:1]
    count, per = groups.metadata["count"], groups.metadata["per"]
    assert f"holds {per} " in groups.prompt and f"in {count} " in groups.prompt and groups.gold == str(count * per)
    assert generate_tasks("word-problems", seed=5, size=30) == generate_tasks("word-problems", seed=5, size=30)


def test_a_place_value_slip_is_always_a_wrong_answer():
    import random

    from veriloop.training.recipes._seed_loop import place_value_slip

    rng = random.Random(0)
    tasks = generate_tasks("word-problems", seed=6, size=400, difficulty=3)
    for task in tasks:
        slip = place_value_slip(task, rng)
        assert slip != int(task.gold) and not _score(task, str(slip)).passed, task.prompt
    bundle = next(t for t in tasks if t.metadata["shape"] == "bundles" and len(set(t.metadata["digits"])) > 1)
    assert str(place_value_slip(bundle, rng)) == bundle.gold[::-1]


def test_demonstrations_carry_each_domains_mistake_in_its_share():
    from veriloop.training.recipes._seed_loop import DOMAINS, SeedLoopConfig, demonstrations

    config = SeedLoopConfig(code_error=0.5, tool_error=0.4)
    tasks = []
    for domain in DOMAINS:
        tasks += generate_tasks(domain.generator, seed=1, size=1600, **domain.options(config))
    rows = {row["task_id"]: row["messages"] for row in demonstrations(config, tasks)}
    paren = [t for t in tasks if t.metadata.get("shape") == "int-paren"]
    without = sum("(" not in rows[t.id][-1]["content"].split("return")[1] for t in paren) / len(paren)
    assert 0.4 < without < 0.6
    tool = [t for t in tasks if t.domain == "tool"]
    guessed = [t for t in tool if len(rows[t.id]) == 2]
    assert 0.32 < len(guessed) / len(tool) < 0.48
    used = next(t for t in tool if len(rows[t.id]) == 4)
    assert [m["role"] for m in rows[used.id]] == ["user", "assistant", "tool", "assistant"]
    assert rows[used.id][1]["content"] == f"<run_python>print({used.metadata['expression']})</run_python>"
    assert rows[used.id][3]["content"] == f"<submit>{used.gold}</submit>"
    guesses = [rows[t.id][1]["content"].removeprefix("<submit>").removesuffix("</submit>") for t in guessed]
    assert sum(g != t.gold for g, t in zip(guesses, guessed)) >= len(guessed) - 1
    math = [t for t in tasks if t.domain == "math"]
    slipped = sum(rows[t.id][-1]["content"] != t.gold for t in math) / len(math)
    assert abs(slipped - config.math_error) < 0.06


def test_the_demonstrated_tool_use_runs_in_the_sandbox_and_passes_while_a_guess_fails(tmp_path):
    from veriloop.core import write_jsonl
    from veriloop.rollout import ReplayEngine, rollout
    from veriloop.training._rollout_worker import sandbox_tools
    from veriloop.training.recipes._seed_loop import SeedLoopConfig, eval_episode

    tasks = generate_tasks("tool-arithmetic", seed=4, size=2, min_digits=3, max_digits=3)
    expression = tasks[0].metadata["expression"]
    script = [
        {
            "prompt": tasks[0].prompt,
            "turns": [f"<run_python>print({expression})</run_python>", f"<submit>{tasks[0].gold}</submit>"],
        },
        {"prompt": tasks[1].prompt, "turns": ["<submit>12345</submit>"]},
    ]
    write_jsonl(tmp_path / "script.jsonl", script)
    tools = sandbox_tools(("python", "submit"), 1)
    try:
        batch = rollout(tasks, ReplayEngine(tmp_path / "script.jsonl"), eval_episode(SeedLoopConfig()), tools=tools)
    finally:
        tools.close()
    used, guessed = batch.trajectories
    assert [t.role for t in used.turns] == ["assistant", "observation", "assistant"]
    assert used.turns[1].text == f"{tasks[0].gold}\n"  # computed by the sandbox's python, not the script
    assert used.score.passed and used.response == tasks[0].gold
    assert not guessed.score.passed and len(guessed.turns) == 1
    assert all(m.role != "system" for m in used.prompt)  # tool_instructions off: the prompt is the question
    from veriloop.rollout import EpisodeConfig

    [described] = rollout(
        tasks[1:], ReplayEngine(tmp_path / "script.jsonl"), EpisodeConfig(tools=("submit",))
    ).trajectories
    assert described.prompt[0].role == "system" and "<submit>" in described.prompt[0].content


def test_slide_back_is_measured_against_the_best_earlier_check():
    from veriloop.training.recipes._seed_loop import slide_back_points

    log = [{"heldout_pass@1": {"code": 0.2, "math": 0.5}}, {"heldout_pass@1": {"code": 0.4, "math": 0.6}}]
    assert slide_back_points(log) == {"code": 0.0, "math": 0.0}
    log.append({"heldout_pass@1": {"code": 0.45, "math": 0.55}})
    assert slide_back_points(log) == {"code": 0.0, "math": 5.0}
    assert slide_back_points(log[:1]) == {}


@pytest.mark.e2e
def test_a_shrunken_seed_loop_runs_end_to_end(tmp_path, run_cli, shrunken_seed_loop):
    out = tmp_path / "sl"
    sizes = {"train_size": 40, "heldout_size": 4, "sft_steps": 2, "sft_batch_size": 8, "prompts_per_step": 6}
    sizes["max_tokens"] = 16  # no sampled answer needs to be whole
    summary = shrunken_seed_loop(out, {"code", "math", "tool"}, seesaw_every=1, seesaw_tasks=2, **sizes)
    assert [e["step"] for e in summary["seesaw_log"]] == [0, 1, 2]
    assert set(summary["seesaw_log"][0]["heldout_pass@1"]) == {"code", "math", "tool"}
    assert {"sandbox_busy_fraction", "rollout_tokens_per_s", "inference_to_training"} <= set(summary["rl_step_medians"])
    metrics = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert any("domain/code/reward" in m for m in metrics) and any("domain/tool/reward" in m for m in metrics)
    html = (out / "report.html").read_text()
    assert "<svg" in html and "seed loop" in html and "Held-out pass@1 before and after RL: code" in html

    # heldout_generate_args redraws each held-out split with `veriloop tasks generate`.
    for domain, args in summary["heldout_generate_args"].items():
        assert not {"--seed", "--size", "--out"} & set(args)
        redrawn = tmp_path / f"{domain}.jsonl"
        made = run_cli("tasks", "generate", *args, "--seed", "2", "--size", "4", "--out", str(redrawn), timeout=300)
        assert made.returncode == 0, made.stderr
        stored = read_records(out / f"tasks/{domain}-heldout.jsonl", Task)
        assert read_records(redrawn, Task) == stored
    evaluated = run_cli(
        "eval",
        "--model",
        str(out / "final"),
        "--tasks",
        str(tmp_path / "tool.jsonl"),
        "--samples",
        "1",
        "--max-tokens",
        "24",
        "--tools",
        "python,submit",
        "--max-turns",
        "2",
        "--no-tool-instructions",
        "--out",
        str(tmp_path / "eval-tool"),
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert set(json.loads((tmp_path / "eval-tool" / "summary.json").read_text())["domains"]) == {"tool"}


@pytest.mark.e2e
def test_an_unknown_recipe_is_a_one_line_error(run_cli):
    result = run_cli("quickstart", "--recipe", "seed-lop")
    assert result.returncode == 2 and "unknown recipe; known: arithmetic, seed-loop" in result.stderr
    bad = run_cli("quickstart", "--recipe", "seed-loop", "code_weight=0")
    assert bad.returncode == 2 and "code_weight" in bad.stderr

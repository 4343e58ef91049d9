"""The seed-loop recipe with its optional domains, CAD and financial statements: the default stays
the three domains, the new domains' demonstrations carry their mistakes in their share, and a
shrunken five-domain run trains and reports every domain end to end (CAD scripts run in the
sandbox on the real ``cad`` environment)."""

import json

import pytest

from veriloop.core import Response, Task, read_records
from veriloop.evaluation import read_samples
from veriloop.tasks import generate_tasks
from veriloop.training.recipes._seed_loop import (
    DOMAIN_NAMES,
    SeedLoopConfig,
    chosen_domains,
    demonstrations,
    eval_episode,
    missing_feature,
    rl_config,
)
from veriloop.verifiers import verify


def _score(task, text):
    return verify(task, Response(id="r", task_id=task.id, response=text))


def _drawn(config, size):
    tasks = []
    for domain in chosen_domains(config):
        tasks += generate_tasks(domain.generator, seed=1, size=size, **domain.options(config))
    return tasks


def test_the_default_recipe_keeps_its_three_domains_and_weights():
    config = SeedLoopConfig()
    assert [d.name for d in chosen_domains(config)] == ["code", "math", "tool"]
    assert config.weights() == {"code": 0.5, "math": 0.3, "tool": 0.2}
    five = SeedLoopConfig(domains=list(DOMAIN_NAMES), cad_weight=0.1)
    assert five.weights() == {"code": 0.5, "math": 0.3, "tool": 0.2, "cad": 0.1, "financial": 0.2}
    assert [d.generate_args(five) for d in chosen_domains(five)][3:] == [
        ["cad", "--difficulty", "1", "--domain", "cad"],
        ["financial-docs", "--document", "statement", "--groups", "1", "--difficulty", "1", "--domain", "financial"],
    ]


def test_the_rollout_engine_reaches_the_rl_stage(tmp_path):
    assert rl_config(SeedLoopConfig(), tmp_path / "base", tmp_path / "rl").rollout.engine == "hf"
    assert rl_config(SeedLoopConfig(engine="vllm"), tmp_path / "base", tmp_path / "rl").rollout.engine == "vllm"


@pytest.mark.e2e
def test_bad_domain_lists_are_one_line_errors(run_cli):
    bad = run_cli("quickstart", "--recipe", "seed-loop", "domains=[code,chemistry]")
    assert bad.returncode == 2 and "domains" in bad.stderr
    assert "unknown domain(s) chemistry; known: code, math, tool, cad, financial" in bad.stderr
    assert "Traceback" not in bad.stderr
    twice = run_cli("quickstart", "--recipe", "seed-loop", "domains=[code,code]")
    assert twice.returncode == 2 and "name each domain once" in twice.stderr
    for budgets, message in (
        ("{cad: 0}", "domain 'cad': 0 is not a token budget; give a whole number >= 1"),
        ("{chemistry: 40}", "unknown domain(s) chemistry; known: code, math, tool, cad, financial"),
    ):
        bad = run_cli("quickstart", "--recipe", "seed-loop", f"max_tokens_by_domain={budgets}")
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr


def test_cad_turns_fit_the_reference_scripts_and_the_other_domains_keep_40_tokens(tiny_model_dir, tmp_path):
    """The recipe's RL and held-out episodes give a CAD turn room for a whole reference script
    (the reply the demonstrations teach, with its end-of-turn token), which the 40 tokens of
    the other domains would cut short; the default three domains are configured as before."""
    from transformers import AutoTokenizer

    from veriloop.training import episode_config

    five = SeedLoopConfig(domains=list(DOMAIN_NAMES))
    episodes = [eval_episode(five), episode_config(rl_config(five, tmp_path / "base", tmp_path / "rl"))]
    for episode in episodes:
        assert {d: episode.max_tokens_for(d) for d in DOMAIN_NAMES} == {
            "code": 40,
            "math": 40,
            "tool": 40,
            "cad": 416,
            "financial": 40,
        }
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)  # the recipe's: the tiny model's, seed 0
    config = SeedLoopConfig(domains=["cad", "financial"])
    replies = {d: [] for d in ("cad", "financial")}
    for task in _drawn(config, 100):
        reply = demonstrations(config, [task])[0]["messages"][-1]["content"]
        replies[task.domain].append(len(tokenizer.encode(reply, add_special_tokens=False)) + 1)  # + end of turn
    assert 40 < max(replies["cad"]) <= 416 and max(replies["financial"]) <= 40
    three = SeedLoopConfig()
    assert rl_config(three, tmp_path / "base", tmp_path / "rl").rollout.max_tokens_by_domain == {}
    assert eval_episode(three).max_tokens_by_domain == {}
    assert episode_config(rl_config(three, tmp_path / "base", tmp_path / "rl")).stop.max_total_tokens == 40 * 2 * 4


def test_financial_demonstrations_slip_a_unit_in_their_share_and_the_slip_fails():
    config = SeedLoopConfig(domains=["financial"], financial_error=0.4)
    tasks = _drawn(config, 300)
    rows = {row["task_id"]: row["messages"] for row in demonstrations(config, tasks)}
    slipped = [t for t in tasks if json.loads(rows[t.id][-1]["content"]) != t.gold]
    assert abs(len(slipped) / len(tasks) - config.financial_error) < 0.07
    for task in tasks[:30]:
        answer = rows[task.id][-1]["content"]
        assert _score(task, answer).passed == (task not in slipped), (answer, task.gold)
    wrong = slipped[0]
    [(name, value)] = json.loads(rows[wrong.id][-1]["content"]).items()
    assert value == pytest.approx(wrong.gold[name] / 1000)  # thousands given as millions
    assert "1,000" in _score(wrong, rows[wrong.id][-1]["content"]).feedback


def test_a_cad_script_without_its_last_feature_loses_a_hole_or_a_section():
    plate = next(t for t in generate_tasks("cad", seed=2, size=20, difficulty=1) if t.metadata["part"] == "plate")
    cut = missing_feature(plate.gold)
    assert cut.count("m3d.Manifold.cylinder") == plate.gold.count("m3d.Manifold.cylinder") - 1
    assert missing_feature("part = m3d.Manifold.cube([1, 1, 1])\n") == "part = m3d.Manifold.cube([1, 1, 1])\n"
    config = SeedLoopConfig(domains=["cad"], cad_error=0.4)
    tasks = _drawn(config, 300)
    rows = {row["task_id"]: row["messages"][-1]["content"] for row in demonstrations(config, tasks)}
    cut_short = [t for t in tasks if rows[t.id] != f"```python\n{t.gold}```"]
    assert abs(len(cut_short) / len(tasks) - config.cad_error) < 0.07
    assert all(rows[t.id] == f"```python\n{missing_feature(t.gold)}```" for t in cut_short)


@pytest.mark.e2e
@pytest.mark.usefixtures("env_with_cad")
def test_the_cad_demonstrations_gold_passes_in_the_sandbox_and_a_missing_feature_fails():
    [shaft] = [t for t in generate_tasks("cad", seed=2, size=20, difficulty=1) if t.metadata["part"] == "shaft"][:1]
    assert _score(shaft, f"```python\n{shaft.gold}```").passed
    score = _score(shaft, f"```python\n{missing_feature(shaft.gold)}```")
    assert score.status == "scored" and score.reward == 0.0


@pytest.mark.e2e
@pytest.mark.usefixtures("env_with_cad")
def test_a_shrunken_five_domain_seed_loop_trains_and_reports_every_domain(tmp_path, run_cli, shrunken_seed_loop):
    out = tmp_path / "sl5"
    names = {"code", "math", "tool", "cad", "financial"}
    summary = shrunken_seed_loop(
        out,
        names,
        domains="[code,math,tool,cad,financial]",
        train_size=6,
        heldout_size=2,
        sft_steps=2,
        sft_batch_size=5,
        rl_steps=1,
        prompts_per_step=5,
        max_tokens=16,  # no sampled answer needs to be whole (cad keeps its own 416 tokens a turn)
        seesaw_every=5,  # the baseline check only
        seesaw_tasks=1,
        sandbox_workers=1,
    )
    assert set(summary["heldout_generate_args"]) == names
    assert summary["domain_weights"] == {"code": 0.5, "math": 0.3, "tool": 0.2, "cad": 0.2, "financial": 0.2}
    assert [e["step"] for e in summary["seesaw_log"]] == [0]
    assert set(summary["seesaw_log"][0]["heldout_pass@1"]) == names
    metrics = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert all(any(m.get(f"domain/{d}/drawn", 0) > 0 for m in metrics) for d in names)  # RL sampled every domain
    for name in ("base", "final"):
        evaluated = json.loads((out / "eval" / name / "summary.json").read_text())
        assert set(evaluated["domains"]) == names and evaluated["infra_errors"] == 0
        assert evaluated["max_tokens_by_domain"] == {"cad": 416}
        cad_tokens = [
            s.completion_tokens for s in read_samples(out / "eval" / name / "samples.parquet") if s.domain == "cad"
        ]
        assert 16 < max(cad_tokens) <= 416 * 2  # a CAD turn is not cut at the other domains' 16 tokens
    sft = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    assert {row["task_id"].split("/")[0] for row in sft} >= {"cad", "financial-docs"}
    assert "Held-out pass@1 before and after RL: code" in (out / "report.html").read_text()

    # the new domains' held-out splits are redrawn by their `tasks generate` arguments
    for domain in ("cad", "financial"):
        args = summary["heldout_generate_args"][domain]
        redrawn = tmp_path / f"{domain}.jsonl"
        made = run_cli("tasks", "generate", *args, "--seed", "2", "--size", "2", "--out", str(redrawn), timeout=300)
        assert made.returncode == 0, made.stderr
        assert read_records(redrawn, Task) == read_records(out / f"tasks/{domain}-heldout.jsonl", Task)


@pytest.mark.e2e
def test_the_cad_domain_without_its_environment_stops_before_training(tmp_path, run_cli, monkeypatch):
    from veriloop.sandbox._environments import ENV_DIR_VARIABLE

    empty = tmp_path / "no-envs"
    empty.mkdir()
    empty.chmod(0o755)
    monkeypatch.setenv(ENV_DIR_VARIABLE, str(empty))
    out = tmp_path / "sl"
    result = run_cli(
        "quickstart", "--recipe", "seed-loop", f"out={out}", "domains=[cad]", "train_size=2", "heldout_size=1"
    )
    assert result.returncode == 2, result.stderr
    assert "seed-loop domain cad: environment 'cad' is not built" in result.stderr
    assert "manifold3d trimesh numpy" in result.stderr and "Traceback" not in result.stderr
    assert not (out / "base").exists()

"""A shortened quickstart end to end (tiny budget): every piece exists and loads."""

import json

import pytest


@pytest.mark.e2e
def test_short_quickstart_runs_end_to_end_and_resumes(tmp_path, run_cli):
    out = tmp_path / "qs"
    settings = [
        f"out={out}",
        "train_size=300",
        "heldout_size=40",
        "sft_steps=15",
        "rl_steps=2",
        "prompts_per_step=8",
        "eval_samples=2",
    ]
    result = run_cli("quickstart", *settings, timeout=900)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    for name in ("base", "final"):
        assert (out / name / "config.json").exists()
        assert 0.0 <= summary["heldout_pass@1"][name] <= 1.0
    assert summary["heldout_generate_args"][0] == "arithmetic"
    assert not {"--seed", "--size", "--out"} & set(summary["heldout_generate_args"])
    assert summary["splits"]["overlapping_heldout_tasks"] == 0
    assert len(summary["reward_first_steps"]) == 2
    html = (out / "report.html").read_text()
    assert "<svg" in html and "quickstart" in html
    assert html.index("<div class=headline>Held-out pass@1 went from") < html.index("<h1>")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(out / "final")
    AutoTokenizer.from_pretrained(out / "final")

    # A second run finds every stage done and only re-evaluates and re-reports.
    base_mtime = (out / "base" / "model.safetensors").stat().st_mtime
    again = run_cli("quickstart", *settings, timeout=900)
    assert again.returncode == 0, again.stderr
    assert (out / "base" / "model.safetensors").stat().st_mtime == base_mtime


@pytest.mark.e2e
def test_a_bad_setting_is_a_one_line_error(run_cli):
    result = run_cli("quickstart", "rl_stpes=3")
    assert result.returncode == 2 and "unknown field 'rl_stpes'" in result.stderr


def _summary(before: float, after: float, gain: float, ci: list[float]) -> dict:
    """The figures of OUT/summary.json that the report's headline reads."""
    return {
        "heldout_pass@1": {"base": before, "final": after},
        "heldout_pass@1_gain_points": gain,
        "heldout_pass@1_gain_ci_points": ci,
        "heldout_samples_per_task": 2,
        "splits": {"heldout_tasks": 6},
    }


def test_the_headline_states_the_heldout_result_before_and_after_with_its_interval():
    from veriloop.training.recipes._quickstart import quickstart_headline

    assert quickstart_headline(_summary(0.3137, 0.5, 18.63, [12.41, 24.96])) == (
        "Held-out pass@1 went from 31.4% before RL to 50.0% after: +18.6 points "
        "(paired 95% CI +12.4 to +25.0) on 6 held-out tasks, 2 samples each."
    )
    assert "-4.0 points (paired 95% CI -9.1 to +1.2)" in quickstart_headline(_summary(0.5, 0.46, -4.0, [-9.1, 1.2]))


def test_the_report_leads_with_the_headline_over_real_evals(tmp_path, tiny_engine):
    from veriloop.core import write_jsonl
    from veriloop.evaluation import run_eval
    from veriloop.tasks import generate_tasks
    from veriloop.training.recipes._quickstart import HELDOUT_FILE, RL_DIR, write_quickstart_report

    write_jsonl(tmp_path / HELDOUT_FILE, generate_tasks("arithmetic", seed=2, size=6))
    for name in ("base", "final"):
        run_eval(
            tiny_engine, tmp_path / HELDOUT_FILE, samples=2, out=tmp_path / "eval" / name, max_tokens=4, record=False
        )
    (tmp_path / RL_DIR).mkdir()
    (tmp_path / RL_DIR / "metrics.jsonl").write_text('{"step": 1, "reward/sampled_mean": 0.1}\n', encoding="utf-8")
    html = write_quickstart_report(tmp_path, _summary(0.25, 0.5, 25.0, [10.0, 40.0])).read_text(encoding="utf-8")
    body = html[html.index("<body>") + len("<body>") :]
    assert body.startswith("<div class=headline>Held-out pass@1 went from 25.0% before RL to 50.0% after: +25.0 points")
    assert "<h1>veriloop quickstart</h1>" in body and "<svg" in body
    # the untrained model fails; the held-out file is the eval's task file, so each card has the gold
    assert "<details>" in body and "expected answer not available" not in body

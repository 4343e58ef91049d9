"""A shortened quickstart end to end (tiny budget): every piece exists and loads."""

import json


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
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(out / "final")
    AutoTokenizer.from_pretrained(out / "final")

    # A second run finds every stage done and only re-evaluates and re-reports.
    base_mtime = (out / "base" / "model.safetensors").stat().st_mtime
    again = run_cli("quickstart", *settings, timeout=900)
    assert again.returncode == 0, again.stderr
    assert (out / "base" / "model.safetensors").stat().st_mtime == base_mtime


def test_a_bad_setting_is_a_one_line_error(run_cli):
    result = run_cli("quickstart", "rl_stpes=3")
    assert result.returncode == 2 and "unknown field 'rl_stpes'" in result.stderr

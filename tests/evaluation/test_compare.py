"""compare and gate on runs with planted outcomes: a regression is caught, an improvement passes."""

from __future__ import annotations

import json

import pytest

from veriloop.evaluation import compare, load_run


def _outcomes(domain_passes: dict[str, list[list[bool]]]) -> dict[str, tuple[str, list[bool]]]:
    return {
        f"{domain}/{i}": (domain, passes) for domain, tasks in domain_passes.items() for i, passes in enumerate(tasks)
    }


def _steady(n: int, passed: bool, samples: int = 4) -> list[list[bool]]:
    return [[passed] * samples for _ in range(n)]


def _baseline() -> dict[str, tuple[str, list[bool]]]:
    """math: 30 of 40 tasks solved; code: 20 of 40; facts: 10 of 10."""
    return _outcomes(
        {
            "math": _steady(30, True) + _steady(10, False),
            "code": _steady(20, True) + _steady(20, False),
            "facts": _steady(10, True),
        }
    )


def _regressed() -> dict[str, tuple[str, list[bool]]]:
    """math loses 15 of its 30 solved tasks; code gains 12; facts unchanged: a seesaw."""
    return _outcomes(
        {
            "math": _steady(15, True) + _steady(25, False),
            "code": _steady(32, True) + _steady(8, False),
            "facts": _steady(10, True),
        }
    )


def _improved() -> dict[str, tuple[str, list[bool]]]:
    """code gains 10 tasks, math gains 2, nothing else moves."""
    return _outcomes(
        {
            "math": _steady(32, True) + _steady(8, False),
            "code": _steady(30, True) + _steady(10, False),
            "facts": _steady(10, True),
        }
    )


def test_planted_regression_is_significant_and_flagged_as_seesaw(planted):
    result = compare(planted(_baseline()), planted(_regressed()), seed=1)
    by_domain = {d.domain: d for d in result.domains}
    assert by_domain["math"].delta == -15 / 40 and by_domain["math"].direction == "down"
    assert by_domain["math"].ci_high < 0 and by_domain["math"].p_value < 0.01
    assert by_domain["code"].direction == "up"
    assert by_domain["facts"].delta == 0 and not by_domain["facts"].significant
    assert result.seesaw
    assert len(result.pass_to_fail) == 15 and len(result.fail_to_pass) == 12
    flip = result.pass_to_fail[0]
    assert flip.domain == "math" and flip.a_rate == 1.0 and flip.b_rate == 0.0 and "Expected 42" in flip.feedback
    failures = result.gate_failures(max_drop=0.05)
    assert len(failures) == 1 and failures[0].startswith("math:")
    assert result.gate_failures(max_drop=0.5) == []  # a 37.5-point drop is within a 50-point tolerance


def test_improvement_passes_the_gate_and_is_no_seesaw(planted):
    result = compare(planted(_baseline()), planted(_improved()), seed=1)
    assert result.total.delta > 0 and result.gate_failures(max_drop=0.0) == []
    assert not result.seesaw and not result.pass_to_fail


def test_noise_is_not_significant(planted):
    """Same underlying rates, different samples: the delta is noise and the gate passes."""
    import random

    rng = random.Random(5)
    draw = lambda: _outcomes({"math": [[rng.random() < 0.5 for _ in range(4)] for _ in range(60)]})  # noqa: E731
    result = compare(planted(draw()), planted(draw()), seed=2)
    assert not result.total.significant and result.gate_failures(0.0) == []


def test_tiny_domains_are_never_significant(planted):
    a = _outcomes({"rare": _steady(3, True)})
    b = _outcomes({"rare": _steady(3, False)})
    result = compare(planted(a), planted(b))
    assert result.total.delta == -1.0 and not result.total.significant


def test_tasks_are_paired_by_id_and_unmatched_ones_counted(planted):
    a = _outcomes({"math": _steady(10, True)})
    b = {k: v for k, v in list(a.items())[:7]} | {"math/new": ("math", [False])}
    result = compare(planted(a), planted(b))
    assert result.total.tasks == 7 and result.only_in_a == 3 and result.only_in_b == 1


@pytest.mark.e2e
def test_cli_gate_exit_codes(tmp_path, write_run, run_cli):
    base = write_run(tmp_path / "base", _baseline())
    worse = write_run(tmp_path / "worse", _regressed())
    better = write_run(tmp_path / "better", _improved())

    gated = run_cli("compare", str(base), str(worse), "--gate", "--max-drop", "0.05")
    assert gated.returncode == 1, gated.stderr
    assert "gate: FAIL" in gated.stdout and "math:" in gated.stderr and "seesaw" in gated.stdout

    passed = run_cli("compare", str(base), str(better), "--gate", "--max-drop", "0.02")
    assert passed.returncode == 0, passed.stderr
    assert "gate: pass" in passed.stdout

    report = json.loads(run_cli("compare", str(base), str(worse), "--json", "--gate").stdout)
    assert report["seesaw"] and report["pass_to_fail"] == 15 and len(report["gate"]["failures"]) == 1
    assert report["domains"][0]["domain"] == "(all)"

    assert run_cli("compare", str(base), str(worse)).returncode == 0  # without --gate, a report only


@pytest.mark.e2e
def test_cli_compare_missing_run_is_a_user_error(tmp_path, write_run, run_cli):
    base = write_run(tmp_path / "base", _baseline())
    result = run_cli("compare", str(base), str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope'}: no such eval directory"]
    (tmp_path / "half").mkdir()
    result = run_cli("compare", str(base), str(tmp_path / "half"))
    assert result.returncode == 2 and "not a finished eval run" in result.stderr


def test_load_run_reads_back_what_was_written(tmp_path, write_run):
    run = load_run(write_run(tmp_path / "r", _improved()))
    assert run.label == "r" and len(run.samples) == 90 * 4 and run.summary["domains"]["code"]["pass@1"] == 0.75


def _broken(samples, share: float = 1.0, cause: str = "connection refused"):
    """The same rows with the first ``share`` of them turned into infra errors."""
    cut = round(len(samples) * share)
    broken = {"status": "infra_error", "reward": None, "passed": False, "detail": f"generation failed: {cause}"}
    return [s.model_copy(update=broken) if i < cut else s for i, s in enumerate(samples)]


def test_the_gate_fails_when_nothing_was_compared(planted):
    base = planted(_baseline())
    down = compare(base, _broken(planted(_baseline())))  # the candidate's server was down
    assert down.total.tasks == 0 and down.gate_failures(0.0) == [
        "nothing was compared: no task was scored in both runs"
    ]
    disjoint = compare(base, planted(_outcomes({"other": _steady(20, True)})))
    assert disjoint.gate_failures(0.5)[0].startswith("nothing was compared")


def test_the_gate_fails_on_missing_tasks_and_infra_errors_beyond_their_thresholds(planted):
    base = planted(_baseline())
    partial = dict(list(_baseline().items())[:72])  # 18 of 90 tasks (20%) not run
    missing = compare(base, planted(partial))
    assert any("18 of A's 90 scored tasks (20%)" in line for line in missing.gate_failures(0.0))
    assert missing.gate_failures(0.0, max_missing=0.25) == []
    flaky = compare(base, _broken(planted(_baseline()), share=0.1))  # 36 of 360 samples; 9 tasks lost whole
    failures = flaky.gate_failures(0.0, max_missing=0.2)
    assert failures == ["10% of B's samples are infra errors: more than 5% (--max-infra)"]
    assert flaky.gate_failures(0.0, max_missing=0.2, max_infra=0.2) == []


def test_cli_gate_on_runs_with_no_task_in_common(tmp_path, write_run, run_cli):
    base = write_run(tmp_path / "base", _baseline())
    down = write_run(tmp_path / "down", _outcomes({"other": _steady(20, True)}))
    gated = run_cli("compare", str(base), str(down), "--gate")
    assert gated.returncode == 1 and "gate: FAIL" in gated.stdout and "nothing was compared" in gated.stderr

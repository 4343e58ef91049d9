"""The HTML report: one self-contained file that a real headless browser renders."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from veriloop.core import UserError
from veriloop.evaluation import RunRegistry, render_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _steady(domain: str, solved: int, total: int) -> dict[str, tuple[str, list[bool]]]:
    return {f"{domain}/{i}": (domain, [i < solved] * 2) for i in range(total)}


@pytest.fixture
def runs(tmp_path, write_run):
    """Three checkpoints' eval runs (math falls at the last one) and a training run."""
    base = write_run(tmp_path / "step-0", _steady("math", 10, 30) | _steady("code", 5, 30), "2026-01-01T00:00:00+00:00")
    mid = write_run(
        tmp_path / "step-50", _steady("math", 18, 30) | _steady("code", 12, 30), "2026-01-02T00:00:00+00:00"
    )
    last = write_run(
        tmp_path / "step-100", _steady("math", 6, 30) | _steady("code", 25, 30), "2026-01-03T00:00:00+00:00"
    )
    training = tmp_path / "train-run"
    training.mkdir()
    lines = [{"step": s, "reward/sampled_mean": 0.2 + 0.005 * s} for s in range(1, 101)]
    lines += [{"step": s, "eval/pass@1": 0.25 + 0.002 * s} for s in (50, 100)]
    (training / "metrics.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + '{"step": 10', encoding="utf-8"
    )
    return [base, mid, last, training]


def test_report_is_self_contained_with_every_section(runs, tmp_path):
    html = render_report(runs)
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 3
    for heading in (
        "Runs",
        "pass@1 across runs",
        "pass@1 per domain",
        "Training reward",
        "Each run against the one before",
        "Failures of step-100",
    ):
        assert f"<h2>{heading}</h2>" in html
    assert "step-100 vs step-50" in html and "seesaw" in html
    assert "Expected 42 for math/6, got 41." in html  # a failure example with the verifier's feedback
    assert not re.search(r"<(script|link|img)\b|\bsrc=|url\((?!#)", html)  # nothing fetched from elsewhere


def test_registry_adds_earlier_runs_to_the_trend(runs, tmp_path):
    registry = RunRegistry(tmp_path / "evals.sqlite")
    for directory in runs[:3]:
        registry.record(directory, json.loads((directory / "summary.json").read_text()))
    html = render_report([runs[2]], registry=tmp_path / "evals.sqlite")
    table = html[html.index("<h2>Runs</h2>") : html.index("<h2>pass@1 across runs</h2>")]
    assert [m for m in re.findall(r"<tr><td>(step-\d+)</td>", table)] == ["step-0", "step-50", "step-100"]
    with pytest.raises(UserError, match="no such run registry"):
        render_report([runs[2]], registry=tmp_path / "missing.sqlite")


def test_unknown_directories_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="neither an eval directory"):
        render_report([tmp_path])
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(UserError, match=r"metrics.jsonl: line 2: malformed JSON"):
        render_report([tmp_path])


def _chromium(*args: str, profile) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make setup installs it: apt-get install -y chromium)"
)
@pytest.mark.e2e
def test_report_renders_in_headless_chromium(runs, tmp_path, run_cli):
    import numpy as np
    from PIL import Image

    out = tmp_path / "report.html"
    made = run_cli("report", *map(str, runs), "--out", str(out), "--title", "checkpoints of run 7")
    assert made.returncode == 0, made.stderr

    dom = _chromium("--dump-dom", out.as_uri(), profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr
    assert "checkpoints of run 7" in dom.stdout and dom.stdout.count("<svg") == 3
    assert "Expected 42 for math/6, got 41." in dom.stdout

    screenshot = tmp_path / "report.png"
    shot = _chromium(
        "--window-size=1280,2600", f"--screenshot={screenshot}", out.as_uri(), profile=tmp_path / "profile"
    )
    assert shot.returncode == 0 and screenshot.is_file(), shot.stderr
    image = Image.open(screenshot).convert("RGB")
    assert image.size == (1280, 2600)
    pixels = np.asarray(image.resize((320, 650))).reshape(-1, 3).astype(int)  # (N, 3) RGB
    inked = float((pixels.sum(axis=1) < 600).mean())
    assert 0.01 < inked < 0.6  # text and plots were drawn, and the page is not a solid block
    saturated = float(((pixels.max(axis=1) - pixels.min(axis=1)) > 80).mean())
    assert saturated > 0.002  # the coloured plot lines and bars, not only black text on white


def test_cli_report_needs_a_run(tmp_path, run_cli):
    result = run_cli("report", str(tmp_path / "nothing"), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2 and "neither an eval directory" in result.stderr
    assert not (tmp_path / "r.html").exists()

"""The report's pipeline utilisation section: shown for runs that log util/* metrics, with their numbers."""

from __future__ import annotations

import json
import re

from veriloop.evaluation import render_report
from veriloop.evaluation._report import pipeline_utilisation


def _write_metrics(directory, records):
    directory.mkdir()
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return directory


def _async_records():
    """Four steps of an async run (staleness 1) and an eval record, as RLTrainer logs them."""
    records = []
    for step in range(1, 5):
        records.append(
            {
                "step": step,
                "reward/sampled_mean": 0.1 * step,
                "util/trainer_busy_s": 2.0,
                "util/trainer_wait_s": 0.5 if step == 1 else 0.0,
                "util/generator_busy_s": 3.0,
                "util/generator_wait_s": 0.0,
                "util/engine_busy_s": 1.0,
                "util/sandbox_busy_fraction": 0.2 if step < 4 else 0.8,
                "time/rollout_s": 3.0 if step < 4 else 1.0,
                "util/inference_to_training": 1.5,
                "util/trainer_busy_fraction": 0.5 + 0.1 * step,
                "util/generator_busy_fraction": 0.9,
                "util/queue_depth": step % 2,
                "time/step_s": 2.5,
                "staleness/mean": 0.5,
                "staleness/max": 1,
                "staleness/hist/0": 8.0,
                "staleness/hist/1": 8.0 if step > 1 else 0.0,
            }
        )
    records.append({"step": 4, "eval/pass@1": 0.4})
    return records


def test_utilisation_summary_numbers():
    u = pipeline_utilisation(_async_records())
    assert u is not None and u.steps == 4
    assert u.trainer_busy == 0.9 and u.generator_busy == 0.9  # cumulative fractions: the last step's
    assert abs(u.sandbox_busy - (0.2 * 9 + 0.8 * 1) / 10) < 1e-9  # weighted by rollout seconds
    assert u.inference_to_training == 1.5 and u.queue_depth == 0.5 and u.step_s == 2.5
    assert u.staleness == {0: 32, 1: 24}
    assert pipeline_utilisation([{"step": 1, "reward/mean": 0.3}]) is None


def test_report_shows_utilisation_of_runs_that_log_it(tmp_path):
    pipelined = _write_metrics(tmp_path / "async-run", _async_records())
    plain = _write_metrics(tmp_path / "old-run", [{"step": s, "reward/sampled_mean": 0.2} for s in range(1, 4)])
    html = render_report([pipelined, plain])
    assert "<h2>Pipeline utilisation</h2>" in html
    section = html[html.index("<h2>Pipeline utilisation</h2>") :]
    rows = re.findall(r"<tr><td>([^<]+)</td>", section)
    assert rows == ["async-run"]  # the run without util metrics gets no row
    row = section[section.index("<tr><td>async-run</td>") :]
    row = row[: row.index("</tr>")]
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[:8] == ["async-run", "4", "2.50", "90.0%", "90.0%", "26.0%", "1.50", "0.50"]
    assert cells[8].startswith("0: 32, 1: 24") and "mean 0.43" in cells[8]
    assert html.count("<svg") == 2  # the reward curves and the busy-seconds plot
    assert "trainer waiting" in section


def test_runs_without_utilisation_metrics_get_no_section(tmp_path):
    plain = _write_metrics(tmp_path / "old-run", [{"step": s, "reward/sampled_mean": 0.2} for s in range(1, 4)])
    html = render_report([plain])
    assert "Pipeline utilisation" not in html and html.count("<svg") == 1

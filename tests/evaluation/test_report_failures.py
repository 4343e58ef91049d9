"""The report's failure cards: the model's response, the task's expected answer behind a click,
and the verifier's feedback, all as text; and a headline that leads the page."""

from __future__ import annotations

import json

from veriloop.core import Task, write_jsonl, write_parquet
from veriloop.evaluation import read_samples, render_report

SCRIPT = "<script>alert('x')</script>"


def _eval_dir(tmp_path, write_run, golds: dict[str, object], response: str = "41"):
    """An eval run over one task per gold, every sample failed, whose eval.json lists its task file."""
    tasks = [
        Task(id=task_id, domain="math", prompt=f"question of {task_id}", verifier={"kind": "exact"}, gold=gold)
        for task_id, gold in golds.items()
    ]
    task_file = tmp_path / "tasks.jsonl"
    write_jsonl(task_file, tasks)
    run = write_run(tmp_path / "run", {task.id: ("math", [False]) for task in tasks})
    samples = [s.model_copy(update={"response": response}) for s in read_samples(run / "samples.parquet")]
    write_parquet(run / "samples.parquet", samples)
    (run / "eval.json").write_text(json.dumps({"task_files": [str(task_file)]}), encoding="utf-8")
    return run, task_file


def _card(html: str, task_id: str) -> str:
    start = html.index(f"&middot; {task_id} &middot;")
    return html[start : html.index("</pre></div>", html.index("class=feedback", start))]


def test_a_failure_card_shows_the_gold_behind_a_click_between_response_and_verifier(tmp_path, write_run):
    run, _ = _eval_dir(tmp_path, write_run, {"math/0": "42", "math/1": {"answer": 7}})
    html = render_report([run])
    card = _card(html, "math/0")
    response, gold, verifier = (card.index(part) for part in ("<pre>41</pre>", "<details>", ">verifier<"))
    assert response < gold < verifier
    assert "<summary class=label>expected answer (the task's gold)</summary><pre>42</pre></details>" in card
    assert "&quot;answer&quot;: 7" in _card(html, "math/1")  # a structured gold as JSON


def test_a_response_or_gold_with_markup_shows_as_text(tmp_path, write_run):
    run, _ = _eval_dir(tmp_path, write_run, {"math/0": SCRIPT}, response=f"{SCRIPT}<b>bold</b>")
    html = render_report([run])
    assert "<script" not in html and "<b>bold" not in html
    card = _card(html, "math/0")
    assert card.count("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;") == 2 and "&lt;b&gt;bold" in card


def test_a_missing_task_file_says_the_expected_answer_is_not_available(tmp_path, write_run):
    run, task_file = _eval_dir(tmp_path, write_run, {"math/0": "42"})
    task_file.unlink()
    card = _card(render_report([run]), "math/0")
    assert "expected answer not available" in card and "<details>" not in card


def test_a_run_without_eval_json_or_a_task_without_gold_says_so(tmp_path, write_run):
    run, _ = _eval_dir(tmp_path, write_run, {"math/0": None})
    assert "the task has no expected answer" in _card(render_report([run]), "math/0")
    (run / "eval.json").unlink()
    assert "expected answer not available" in _card(render_report([run]), "math/0")


def test_a_headline_is_the_first_thing_on_the_page_and_is_escaped(tmp_path, write_run):
    run, _ = _eval_dir(tmp_path, write_run, {"math/0": "42"})
    html = render_report([run], headline=f"pass@1 rose {SCRIPT}")
    body = html[html.index("<body>") + len("<body>") :]
    assert body.startswith("<div class=headline>pass@1 rose &lt;script&gt;")
    assert "class=headline" not in render_report([run])

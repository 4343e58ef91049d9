"""``veriloop eval`` reports the cad and financial_docs domains apart, scored by their verifiers
(a replayed policy answers: the verifiers and the CAD environment are under test, not a model);
a cad task that asks for a picture gets it kept in the run and shown on the review page."""

from __future__ import annotations

import base64
import json

import pytest

from veriloop.core import write_jsonl
from veriloop.evaluation import load_run
from veriloop.review import load_sources
from veriloop.review._pages import review_page
from veriloop.review._sampler import QueueItem
from veriloop.tasks import generate_tasks
from veriloop.verifiers.audit._exploits import fence

pytestmark = pytest.mark.e2e


def test_eval_reports_each_new_domain_with_its_own_pass_rate(tmp_path, run_cli, env_with_cad):
    cad = generate_tasks("cad", seed=4, size=3, difficulty=1)
    cad[0] = cad[0].model_copy(update={"verifier": {**cad[0].verifier, "render": True}})
    docs = generate_tasks("financial-docs", seed=4, size=2)
    docs += generate_tasks("financial-docs", seed=5, size=1, document="statement", groups=1)
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, cad + docs)
    replies = [
        fence(cad[0].gold),
        fence(cad[1].gold),
        fence("import trimesh\ntrimesh.creation.box().export('model.stl')"),
    ]
    wrong = {name: value + 5 for name, value in docs[1].gold.items()}
    replies += ["```json\n" + json.dumps(answer) + "\n```" for answer in (docs[0].gold, wrong, docs[2].gold)]
    script = tmp_path / "policy.jsonl"
    script.write_text(
        "".join(json.dumps({"prompt": t.prompt, "turns": [r]}) + "\n" for t, r in zip(cad + docs, replies))
    )
    out = tmp_path / "eval"
    result = run_cli(
        "eval", "--model", f"replay:{script}", "--tasks", str(tasks), "--samples", "1", "--out", str(out), timeout=300
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["domains"]) == {"cad", "financial_docs"} and summary["infra_errors"] == 0
    for domain in ("cad", "financial_docs"):
        assert summary["domains"][domain]["tasks"] == 3
        assert abs(summary["domains"][domain]["pass@1"] - 2 / 3) < 1e-5, summary["domains"][domain]  # 6 digits kept

    pictures = {s.task_id: s.images for s in load_run(out).samples}
    assert base64.b64decode(pictures[cad[0].id]["render.png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert all(not pictures[t.id] for t in cad[1:] + docs)  # off unless the task asks
    sample = next(s for s in load_sources([out]) if s.task_id == cad[0].id)
    item = QueueItem(position=0, sample=sample, stratum="s", priority=1.0, signals=(), reasons=())
    page = review_page(item, 1, ())
    assert f"<img src='data:image/png;base64,{pictures[cad[0].id]['render.png']}' alt='render.png'>" in page

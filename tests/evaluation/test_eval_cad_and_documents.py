"""``veriloop eval`` reports the cad and financial_docs domains apart, scored by their verifiers
(a replayed policy answers: the verifiers and the CAD environment are under test, not a model)."""

from __future__ import annotations

import json

from veriloop.core import write_jsonl
from veriloop.tasks import generate_tasks
from veriloop.verifiers.audit._exploits import fence


def test_eval_reports_each_new_domain_with_its_own_pass_rate(tmp_path, run_cli, env_with_cad):
    cad = generate_tasks("cad", seed=4, size=3, difficulty=1)
    docs = generate_tasks("financial-docs", seed=4, size=3)
    tasks = tmp_path / "tasks.jsonl"
    write_jsonl(tasks, cad + docs)
    replies = [
        fence(cad[0].gold),
        fence(cad[1].gold),
        fence("import trimesh\ntrimesh.creation.box().export('model.stl')"),
    ]
    replies += ["```json\n" + json.dumps(t.gold) + "\n```" for t in docs[:2]]
    replies.append("```json\n" + json.dumps({name: value + 5 for name, value in docs[2].gold.items()}) + "\n```")
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

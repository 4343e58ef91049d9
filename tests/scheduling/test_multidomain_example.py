"""examples/multidomain.yaml loads, and a 2-step run of it on small versions of its six domains works."""

from pathlib import Path

import pytest
import yaml

from veriloop.core import write_jsonl
from veriloop.tasks import generate_tasks, import_tasks
from veriloop.training import RLTrainer, load_config, read_metrics

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multidomain.yaml"
ARITHMETIC = {
    "difficulty": 2,
    "operands": 2,
    "max_operands": 3,
    "max_operand": 19,
    "operators": "+-",
    "verifier": "exact",
}
STATEMENTS = {"document": "statement", "groups": 1, "difficulty": 1}


def small_domains(root: Path) -> list[dict]:
    """The example's six mixture entries, pointed at small task files drawn here."""
    files = {
        "arithmetic": (
            generate_tasks("arithmetic", seed=1, size=6, **ARITHMETIC),
            generate_tasks("arithmetic", seed=2, size=3, **ARITHMETIC),
        ),
        "basic_arithmetic": (
            import_tasks("reasoning-gym", dataset="basic_arithmetic", seed=1, size=6),
            import_tasks("reasoning-gym", dataset="basic_arithmetic", seed=2, size=3),
        ),
        "numeric_tables": (
            generate_tasks("numeric-tables", seed=1, size=4),
            generate_tasks("numeric-tables", seed=2, size=2),
        ),
        "cad": (
            generate_tasks("cad", seed=1, size=3, difficulty=1),
            generate_tasks("cad", seed=2, size=2, difficulty=1),
        ),
        "financial_docs": (
            generate_tasks("financial-docs", seed=1, size=3, **STATEMENTS),
            generate_tasks("financial-docs", seed=2, size=2, **STATEMENTS),
        ),
        "code": (import_tasks("humaneval", size=2), None),
    }
    example = yaml.safe_load(EXAMPLE.read_text())["schedule"]["mixture"]
    entries = []
    for entry, (name, (train, heldout)) in zip(example, files.items(), strict=True):
        assert name in entry["path"]
        write_jsonl(root / f"{name}.jsonl", train)
        entries.append({**entry, "path": str(root / f"{name}.jsonl")})
        if heldout is not None:
            write_jsonl(root / f"{name}-heldout.jsonl", heldout)
            entries[-1]["heldout"] = str(root / f"{name}-heldout.jsonl")
    return entries


def test_the_example_config_loads():
    config = load_config(EXAMPLE)
    assert len(config.schedule.mixture) == 6 and config.schedule.active
    assert (
        config.schedule.normalization == "group"
        and config.schedule.curriculum
        and config.algorithm.advantage == "dr_grpo"
    )
    assert config.data.train == ""


@pytest.mark.e2e
def test_a_two_step_run_on_six_small_domains(tiny_model_dir, env_with_cad, tmp_path):
    mixture = small_domains(tmp_path)
    overrides = [
        f"model.path={tiny_model_dir}",
        f"run.out={tmp_path / 'run'}",
        "run.steps=2",
        "run.checkpoint_every=0",
        "run.loggers=[jsonl]",
        "run.progress=false",
        "rollout.prompts_per_step=6",
        "rollout.group_size=2",
        "rollout.max_tokens=8",
        "schedule.seesaw_every=2",
        "schedule.seesaw_samples=1",
        "schedule.mixture=" + yaml.safe_dump(mixture, default_flow_style=True).strip(),
    ]
    trainer = RLTrainer(load_config(EXAMPLE, overrides))
    history = trainer.train()
    domains = ("arithmetic", "basic_arithmetic", "numeric_tables", "cad", "financial_docs", "code")
    assert sorted(trainer.schedule.mixture.domains) == sorted(domains)
    assert len(history) == 2 and (tmp_path / "run" / "final" / "config.json").is_file()
    records = read_metrics(tmp_path / "run")
    steps = [r for r in records if "groups/sampled" in r]
    assert sum(r["groups/sampled"] for r in steps) == sum(trainer.schedule.mixture.state.drawn.values())
    assert all(sum(r[f"domain/{d}/drawn"] for d in domains) == r["groups/sampled"] for r in steps)
    assert trainer.schedule.mixture.state.drawn["code"] >= 1  # the code domain was rolled out and verified
    assert trainer.schedule.mixture.state.drawn["financial_docs"] >= 1
    checks = [r for r in records if "domain/arithmetic/heldout_pass@1" in r]
    assert [r["step"] for r in checks] == [0, 2] and "domain/code/heldout_pass@1" not in checks[0]
    assert "domain/financial_docs/heldout_pass@1" in checks[0]

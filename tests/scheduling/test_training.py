import dataclasses
import shutil

import pytest

from veriloop.evaluation import render_report
from veriloop.training import RLTrainer, TrainConfig, read_metrics
from veriloop.training._checkpoint import list_checkpoints, load_trainer_state

from .conftest import make_tasks

TRAIN = make_tasks("digits", 8) + make_tasks("letters", 8, pattern="[a-e]")
HELDOUT = make_tasks("digits", 5, start=100) + make_tasks("letters", 5, start=100, pattern="[a-e]")


def config(tiny_model_dir, out, steps=2, **schedule):
    return TrainConfig.model_validate(
        {
            "model": {"path": str(tiny_model_dir)},
            "rollout": {"prompts_per_step": 4, "group_size": 4, "max_tokens": 8},
            "algorithm": {"advantage": "dr_grpo"},
            "optim": {"lr": 2e-3, "warmup_steps": 1},
            "run": {
                "steps": steps,
                "out": str(out),
                "checkpoint_every": 1,
                "keep_checkpoints": 5,
                "loggers": ["jsonl"],
                "progress": False,
            },
            "schedule": {"normalization": "group", "curriculum": True, "weights": {"digits": 3}, **schedule},
        }
    )


@pytest.fixture(scope="module")
def trained_run(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("scheduled") / "run"
    trainer = RLTrainer(config(tiny_model_dir, out, seesaw_every=1, seesaw_samples=2), tasks=TRAIN, heldout=HELDOUT)
    return trainer, trainer.train()


def test_the_trainer_logs_per_domain_metrics(trained_run):
    trainer, history = trained_run
    steps = [m for m in read_metrics(trainer.out) if "domain/digits/drawn" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for record in steps:
        for domain in ("digits", "letters"):
            for name in (
                "weight",
                "drawn",
                "trained",
                "share",
                "reward",
                "pass_rate",
                "reward_scale",
                "learnable",
                "too_easy",
                "too_hard",
                "retired",
                "unseen",
            ):
                assert f"domain/{domain}/{name}" in record, (domain, name)
        assert record["domain/digits/weight"] == pytest.approx(0.75)
        assert record["domain/digits/trained"] + record["domain/letters/trained"] == record["groups/kept"]
        assert record["domain/digits/drawn"] + record["domain/letters/drawn"] == record["groups/sampled"]
        assert record["domain/digits/share"] + record["domain/letters/share"] == pytest.approx(1.0)
    state = trainer.schedule.state.mixture
    assert state.drawn == {d: sum(m[f"domain/{d}/drawn"] for m in steps) for d in ("digits", "letters")}
    assert state.trained["digits"] == steps[-1]["domain/digits/trained_total"]


def test_seesaw_checks_run_through_the_evaluation_layer(trained_run):
    trainer, history = trained_run
    checks = [m for m in read_metrics(trainer.out) if "domain/digits/heldout_pass@1" in m]
    assert [m["step"] for m in checks] == [0, 1, 2]
    assert checks[0]["seesaw/baseline_step"] == 0
    assert all(m["seesaw/fired"] in (0, 1) and "domain/letters/heldout_delta" in m for m in checks[1:])
    assert (trainer.out / "seesaw" / "step-00000002" / "samples.parquet").is_file()
    assert "seesaw/fired" in history[-1]


def test_report_plots_per_domain_curves(trained_run):
    html = render_report([trained_run[0].out])
    for title in (
        "Training reward per domain",
        "Pass rate per domain",
        "Curriculum buckets",
        "Held-out pass@1 per domain",
    ):
        assert title in html


def test_a_stopped_schedule_ends_the_run(trained_run, tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(trained_run[0].out, out)
    trainer = RLTrainer(
        config(tiny_model_dir, out, steps=4, seesaw_every=1, seesaw_samples=2), tasks=TRAIN, heldout=HELDOUT
    )
    assert trainer.step_index == 2
    trainer.schedule.seesaw.state.stopped = True
    assert trainer.train() == [] and trainer.step_index == 2 and (out / "final" / "config.json").is_file()


def _without_timings(records):
    return [
        {k: v for k, v in r.items() if not k.startswith(("time/", "util/")) and not k.endswith("per_s")}
        for r in records
    ]


@pytest.mark.e2e
@pytest.mark.determinism
def test_resume_continues_the_schedule_exactly(trained_run, tiny_model_dir, tmp_path):
    straight, _ = trained_run
    out = tmp_path / "run"
    shutil.copytree(straight.out, out)
    shutil.rmtree(out / "checkpoints" / "step-00000002")  # as if killed before the second checkpoint
    resumed = RLTrainer(config(tiny_model_dir, out, seesaw_every=1, seesaw_samples=2), tasks=TRAIN, heldout=HELDOUT)
    saved = load_trainer_state(list_checkpoints(out / "checkpoints")[-1])["sampler"]
    assert resumed.step_index == 1 and dataclasses.asdict(resumed.schedule.state) == saved
    resumed.train()
    assert dataclasses.asdict(resumed.schedule.state) == dataclasses.asdict(straight.schedule.state)
    assert _without_timings(read_metrics(out)) == _without_timings(read_metrics(straight.out))

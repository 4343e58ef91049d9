import dataclasses
from collections import Counter

import pytest
import yaml

from veriloop.core import UserError, write_jsonl
from veriloop.scheduling import MixtureEntry, MixtureState, TaskMixture, load_mixture, mixture_weights
from veriloop.training import load_config

from .conftest import make_tasks

SIZES = {"small": 7, "large": 300, "mid": 40}


@pytest.mark.parametrize(
    "rule, weights, temperature, expected",
    [
        ("fixed", {"small": 1, "large": 2, "mid": 5}, 1.0, {"small": 0.125, "large": 0.25, "mid": 0.625}),
        ("fixed", {}, 1.0, {"small": 1 / 3, "large": 1 / 3, "mid": 1 / 3}),
        ("temperature", {}, 1.0, {d: n / 347 for d, n in SIZES.items()}),
        ("temperature", {}, 2.0, {d: n**0.5 / sum(m**0.5 for m in SIZES.values()) for d, n in SIZES.items()}),
    ],
)
def test_draw_frequencies_match_the_weights(three_domains, rule, weights, temperature, expected):
    shares = mixture_weights(rule, SIZES, weights, temperature)
    assert shares == pytest.approx(expected)
    mixture = TaskMixture(three_domains, shares, seed=5)
    draws = 20_000
    counts = Counter(task.domain for task in mixture.next(draws))
    for domain, share in expected.items():
        assert counts[domain] / draws == pytest.approx(share, abs=0.002), domain
    assert mixture.state.drawn == dict(counts)  # exact accounting
    # Short windows keep their shares too (a batch of 8 is never all one domain at 1/3 each).
    window = Counter(task.domain for task in mixture.next(8))
    assert all(abs(window[d] - 8 * s) <= 2 for d, s in expected.items())


def test_order_is_deterministic_per_seed_and_cycles_each_domain(three_domains):
    shares = mixture_weights("fixed", SIZES)
    first = [t.id for t in TaskMixture(three_domains, shares, seed=1).next(200)]
    assert first == [t.id for t in TaskMixture(three_domains, shares, seed=1).next(200)]
    assert first != [t.id for t in TaskMixture(three_domains, shares, seed=2).next(200)]
    small = [i for i in first if i.startswith("small/")]
    assert sorted(small[:7]) == sorted(f"small/{i}" for i in range(7))  # a whole epoch before repeats


def test_state_round_trip_continues_the_same_draws(three_domains):
    shares = mixture_weights("fixed", SIZES, {"small": 3})
    straight = TaskMixture(three_domains, shares, seed=9)
    straight.next(50)
    saved = dataclasses.asdict(straight.state)
    expected = [t.id for t in straight.next(120)]
    resumed = TaskMixture(three_domains, shares, seed=9, state=MixtureState(**saved))
    assert [t.id for t in resumed.next(120)] == expected
    assert resumed.state.drawn == straight.state.drawn
    with pytest.raises(UserError, match="resume with the task files the run started with"):
        TaskMixture(make_tasks("other", 3), {"other": 1.0}, seed=9, state=MixtureState(**saved))


def test_reweight_shifts_later_draws(three_domains):
    mixture = TaskMixture(three_domains, mixture_weights("fixed", SIZES), seed=0)
    mixture.next(300)
    mixture.reweight("large", 0.25)
    assert mixture.state.weights["large"] == pytest.approx(1 / 9)
    counts = Counter(t.domain for t in mixture.next(900))
    assert counts["large"] == pytest.approx(100, abs=2) and counts["small"] == pytest.approx(400, abs=2)


def test_mixture_files_and_their_errors(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", make_tasks("a", 4))
    write_jsonl(tmp_path / "b.jsonl", make_tasks("b", 3) + make_tasks("c", 2))
    write_jsonl(tmp_path / "a-held.jsonl", make_tasks("a", 2, start=100))
    data = load_mixture(
        [
            MixtureEntry(path=str(tmp_path / "a.jsonl"), weight=2.0, heldout=str(tmp_path / "a-held.jsonl")),
            MixtureEntry(path=str(tmp_path / "b.jsonl")),
        ]
    )
    assert len(data.tasks) == 9 and data.weights == {"a": 2.0, "b": None, "c": None} and len(data.heldout) == 2
    write_jsonl(tmp_path / "a2.jsonl", make_tasks("a", 2, start=50))
    with pytest.raises(UserError, match="domain 'a' is also in"):
        load_mixture([MixtureEntry(path=str(tmp_path / "a.jsonl")), MixtureEntry(path=str(tmp_path / "a2.jsonl"))])
    write_jsonl(tmp_path / "dup.jsonl", [t.model_copy(update={"domain": "z"}) for t in make_tasks("a", 1)])
    with pytest.raises(UserError, match="is also in"):
        load_mixture([MixtureEntry(path=str(tmp_path / "a.jsonl")), MixtureEntry(path=str(tmp_path / "dup.jsonl"))])


@pytest.mark.parametrize(
    "schedule, extra, message",
    [
        ({"normalization": "zscore"}, {}, "unknown reward normalization 'zscore'; known: group, none, running"),
        ({"seesaw_action": "panic"}, {}, "unknown seesaw action 'panic'; known: reweight, stop, warn"),
        ({"weighting": "temperature", "weights": {"a": 2}}, {}, "temperature weighting sets the weights"),
        ({"curriculum_low": 0.8, "curriculum_high": 0.5}, {}, "curriculum_low must be below"),
        (
            {"mixture": [{"path": "a.jsonl"}]},
            {"data": {"train": "b.jsonl"}},
            "set data.train or schedule.mixture, not both",
        ),
        ({"normalization": "group"}, {}, "no effect with algorithm.advantage=grpo"),
        ({"mixture": [{"path": "a.jsonl", "weight": -1}]}, {}, "schedule.mixture.0.weight"),
    ],
)
def test_bad_schedule_settings_are_user_errors(tmp_path, schedule, extra, message):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"schedule": schedule, **extra}))
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(".", r"\.")) as caught:
        load_config(path)
    assert "\n" not in str(caught.value)


@pytest.mark.e2e
def test_train_command_reports_a_bad_mixture_in_one_line(tmp_path, run_cli):
    write_jsonl(tmp_path / "a.jsonl", make_tasks("a", 2))
    config = {
        "algorithm": {"advantage": "dr_grpo"},
        "schedule": {"mixture": [{"path": str(tmp_path / "a.jsonl")}, {"path": str(tmp_path / "gone.jsonl")}]},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = run_cli("train", str(tmp_path / "config.yaml"))
    assert (
        result.returncode == 2
        and result.stderr.strip().count("\n") == 0
        and "gone.jsonl: no such file" in result.stderr
    )

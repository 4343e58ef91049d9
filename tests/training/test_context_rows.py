"""Trajectories whose context was rewritten train as one row per context; context figures reach
the trainer's episode settings, the rollout metrics and the eval summary."""

from veriloop.core import Segment, Trajectory
from veriloop.evaluation._samples import EvalSample
from veriloop.evaluation._summary import summarize
from veriloop.rollout import summarize_rollout
from veriloop.training import TrainConfig
from veriloop.training._batch import token_batch
from veriloop.training._rollout_worker import episode_config

PROMPT = (1, 2, 3)


def _rewritten() -> Trajectory:
    """Turn 1 [10, 11], observation [20, 21, 22]; the observation dropped to [30]; turn 2 [12]."""
    first = Segment(
        prompt_ids=PROMPT,
        completion_ids=(10, 11),
        logprobs=(-0.5, -0.25),
        loss_mask=(1, 1),
    )
    return Trajectory(
        id="t",
        task_id="x",
        domain="d",
        group_id="g",
        prompt_ids=PROMPT,
        completion_ids=(10, 11, 30, 12),
        logprobs=(0.0, 0.0, 0.0, -0.75),
        loss_mask=(0, 0, 0, 1),
        segments=(first,),
        context_tokens=(3, 6),
        drops=1,
        reward=1.0,
    )


def _plain() -> Trajectory:
    return Trajectory(
        id="p",
        task_id="y",
        domain="d",
        group_id="h",
        prompt_ids=PROMPT,
        completion_ids=(40,),
        logprobs=(-1.0,),
        loss_mask=(1,),
        context_tokens=(3,),
        truncations=1,
        reward=0.0,
    )


def test_each_context_is_a_row_of_its_trajectory():
    batch = token_batch([_plain(), _rewritten()], pad_id=0)
    assert batch.trajectory_index.tolist() == [0, 1, 1]
    assert batch.input_ids[1, :5].tolist() == [1, 2, 3, 10, 11]  # what the model saw at turn 1
    assert batch.input_ids[2, :7].tolist() == [1, 2, 3, 10, 11, 30, 12]  # and at turn 2
    assert batch.loss_mask.tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 1]]
    assert batch.sampler_logprobs[2, 3] == -0.75 and batch.sampler_logprobs[1, :2].tolist() == [-0.5, -0.25]
    assert batch.select(slice(1, 3)).trajectory_index.tolist() == [1, 1]


def test_rollout_metrics_count_every_context():
    metrics = summarize_rollout([_plain(), _rewritten()], wall_s=1.0)
    assert metrics.generated_tokens == 4  # 1 + (2 in the first context, 1 in the rewritten one)
    assert metrics.context_tokens_max == 6 and metrics.context_tokens_mean == 4.0
    assert metrics.drops_per_episode == 0.5 and metrics.truncations_per_episode == 0.5


def test_the_trainer_runs_episodes_within_its_context_budget():
    config = TrainConfig(rollout={"max_tokens": 32, "context_budget": 512, "context_policy": "drop_oldest"})
    episode = episode_config(config)
    assert (episode.context_budget, episode.context_policy, episode.reuse_kv) == (512, "drop_oldest", True)


def test_the_eval_summary_has_the_context_figures():
    rows = [
        EvalSample(
            task_id="a", domain="d", sample_index=0, reward=1.0, turns=2, context_tokens_sum=300, context_tokens_max=200
        ),
        EvalSample(
            task_id="b", domain="d", sample_index=0, reward=0.0, turns=1, context_tokens_sum=100, drops=2, truncations=1
        ),
    ]
    context = summarize(rows, max_k=1)["context"]
    assert context == {
        "tokens_mean_per_turn": round(400 / 3, 6),
        "tokens_max": 200,
        "truncations_per_episode": 0.5,
        "drops_per_episode": 1.0,
    }


def test_segments_survive_the_trajectory_store(tmp_path):
    from veriloop.rollout import TrajectoryStore

    store = TrajectoryStore(tmp_path / "trajectories")
    store.append([_rewritten(), _plain()])
    back = list(store)
    assert back[0].contexts() == _rewritten().contexts() and back[0].drops == 1
    assert back[1].segments == () and back[1].truncations == 1

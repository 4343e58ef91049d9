from pathlib import Path

from veriloop.training import SFTConfig, TrainConfig, load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_example_configs_load():
    train = load_config(EXAMPLES / "train_arithmetic.yaml")
    assert isinstance(train, TrainConfig) and train.rollout.group_size == 8
    sft = load_config(EXAMPLES / "sft.yaml", model=SFTConfig)
    assert sft.optim.steps == 300
    override = load_config(EXAMPLES / "train_arithmetic.yaml", ["optim.lr=3e-5", "rollout.tools=[python, submit]"])
    assert override.optim.lr == 3e-5 and override.rollout.tools == ("python", "submit")
    multidomain = load_config(EXAMPLES / "multidomain.yaml")
    assert len(multidomain.schedule.mixture) == 6 and multidomain.schedule.seesaw_action == "reweight"
    scaled = load_config(EXAMPLES / "async_ray.yaml")
    assert scaled.pipeline.mode == "async" and scaled.pipeline.backend == "ray" and scaled.pipeline.workers == 4
    colocated = load_config(EXAMPLES / "vllm_rl.yaml")
    assert colocated.rollout.engine == "vllm" and colocated.pipeline.mode == "sync"
    assert colocated.rollout.vllm_kv_cache_mb == 256 and colocated.rollout.top_p == 1.0
    agent = load_config(EXAMPLES / "agents" / "train_calculator.yaml")
    assert agent.rollout.agent.callable == "calculator_agent:solve" and agent.rollout.agent.cwd == "examples/agents"

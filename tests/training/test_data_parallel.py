"""Data-parallel training on CPU with gloo and two ranks, launched for real: ranks as separate
processes with torchrun's environment (the way torchrun and the Ray launcher start them), real
``torchrun``, and Ray actors, each on loopback ports picked free.

The claim under test: N ranks train the step one process trains on the same batch.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from veriloop.core import UserError
from veriloop.training._distributed import check_data_parallel, rank_share, ranks_from_environment

pytestmark = pytest.mark.scale

HERE = Path(__file__).parent
PYTHON = sys.executable
TORCHRUN = Path(sys.executable).with_name("torchrun")
# AdamW divides by sqrt(v) + 1e-8: where a gradient is near 1e-8, a 1e-10 difference in the
# gradient (summation order) moves the update by ~1e-5. Updated weights are compared to 1e-6
# relative where gradients are far from that, and as whole tensors to this looser bound.
ADAM_TENSOR_RTOL = 2e-4


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS="1",
    )
    return env


def start_ranks(args: list[str], world_size: int, logs: Path) -> list[subprocess.Popen]:
    """``world_size`` processes running ``args``, rank r with torchrun's environment; output to ``logs``."""
    port = _free_port()
    logs.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            args,
            env=_rank_env(rank, world_size, port),
            stdout=subprocess.DEVNULL,
            stderr=(logs / f"rank{rank}.log").open("w"),
        )
        for rank in range(world_size)
    ]


def run_ranks(args: list[str], world_size: int, logs: Path, timeout: float = 300) -> None:
    processes = start_ranks(args, world_size, logs)
    codes = [p.wait(timeout=timeout) for p in processes]
    assert codes == [0] * world_size, [(logs / f"rank{r}.log").read_text()[-2000:] for r in range(world_size)]


def run_alone(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def torchrun(nproc: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    command = [str(TORCHRUN), "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1"]
    command += ["--master-port", str(_free_port()), "-m", "veriloop", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def assert_same_step(one: dict, two: dict, grad_rtol: float | None = 1e-6) -> None:
    """Gradients equal to ``grad_rtol`` relative per tensor (None: ``two`` has none); updates equal
    where AdamW is well conditioned."""
    assert one["grad"].keys() == (two["grad"].keys() if grad_rtol is not None else one["before"].keys())
    for name, grad in one["grad"].items() if grad_rtol is not None else ():
        difference = (two["grad"][name] - grad).norm() / grad.norm().clamp(min=1e-30)
        assert difference <= grad_rtol, (name, float(difference))
    for name, before in one["before"].items():
        assert torch.equal(before, two["before"][name]), name  # the same starting point
        assert not torch.equal(one["after"][name], before), name  # the step moved every tensor
        conditioned = one["grad"][name].abs() > 1e-5
        after_one, after_two = one["after"][name][conditioned], two["after"][name][conditioned]
        assert torch.allclose(after_two, after_one, rtol=1e-6, atol=1e-8), name
        difference = (two["after"][name] - one["after"][name]).norm() / one["after"][name].norm()
        assert difference <= ADAM_TENSOR_RTOL, (name, float(difference))


def write_config(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def _rl_sections(**run) -> dict:
    """The digit-task config, small: 4 prompts x 4 samples, one torch thread (as each rank has)."""
    return {
        "rollout": {"prompts_per_step": 4},
        "optim": {"warmup_steps": 1},
        "pipeline": {"torch_threads": 1},
        "run": {"checkpoint_every": 1, **run},
    }


@pytest.fixture
def rl_config(config_file):
    return lambda **run: config_file(**_rl_sections(**run))


STRAIGHT_STEPS = 5


@pytest.fixture(scope="module")
def straight(tmp_path_factory, write_config_file) -> Path:
    """The output of one process's run of the ``rl_config`` config, STRAIGHT_STEPS steps with a
    checkpoint after each: the run that ranks, and runs handed between them, must reproduce. The
    learning rate is flat after its warm-up, so step k here is step k of a shorter run."""
    directory = tmp_path_factory.mktemp("straight")
    config = write_config_file(directory, **_rl_sections(steps=STRAIGHT_STEPS))
    run_alone([PYTHON, "-m", "veriloop", "train", str(config), f"run.out={directory / 'run'}"])
    return directory / "run"


# ---- units ------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_rank_shares_cover_the_batch_in_rank_order(count, world_size):
    shares = [rank_share(count, rank, world_size) for rank in range(world_size)]
    assert [i for share in shares for i in share] == list(range(count))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_the_environment_names_the_rank_or_nothing():
    assert ranks_from_environment({}) is None
    full = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    info = ranks_from_environment(full)
    assert (info.rank, info.world_size, info.local_rank, info.is_main) == (1, 2, 1, False)
    with pytest.raises(UserError, match="RANK, WORLD_SIZE set but not LOCAL_RANK, MASTER_ADDR, MASTER_PORT"):
        ranks_from_environment({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(UserError, match="RANK=2 is outside WORLD_SIZE=2"):
        ranks_from_environment({**full, "RANK": "2"})


def test_a_half_set_environment_is_a_one_line_error(rl_config):
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "2"}
    env.pop("LOCAL_RANK", None)
    result = subprocess.run(
        [PYTHON, "-m", "veriloop", "train", str(rl_config())], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: environment: RANK, WORLD_SIZE set but not LOCAL_RANK, MASTER_ADDR, MASTER_PORT; "
        "start data-parallel runs with torchrun --nproc-per-node N -m veriloop train CONFIG"
    ]


def test_data_parallel_rl_refuses_what_it_cannot_split(make_config):
    check_data_parallel(make_config(pipeline={"mode": "async"}), 1)  # one process: anything goes
    with pytest.raises(UserError, match="use pipeline.mode=sync and pipeline.backend=local"):
        check_data_parallel(make_config(pipeline={"mode": "async"}), 2)


# ---- one step: two ranks equal one process -------------------------------------------------------


@pytest.mark.determinism
def test_two_ranks_train_the_rl_step_one_process_trains(tmp_path, rl_config):
    config = rl_config(checkpoint_every=0, out=str(tmp_path / "run"))
    script = [PYTHON, str(HERE / "data_parallel_rank.py"), "rl", str(config)]
    run_alone([*script, str(tmp_path / "one.pt")])
    run_ranks([*script, str(tmp_path / "two.pt")], 2, tmp_path / "logs")
    assert_same_step(torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt"))


def _sft_step_config(directory: Path, model_dir: Path, strategy: str) -> Path:
    """A one-step SFT config of ``strategy``. Answers of different lengths: the ranks' shares hold
    different token counts, so a mean of per-rank means would weigh them wrongly; the whole batch's
    token mean must come out."""
    data = directory / "sft.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"{i}?"}, {"role": "assistant", "content": str(i) * (1 + i % 4)}]}
        for i in range(6)
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return write_config(
        directory / f"sft-{strategy}.yaml",
        {
            "model": {"path": str(model_dir)},
            "data": {"train": str(data)},
            "optim": {"batch_size": 5, "lr": 2e-3},
            "distributed": {"strategy": strategy},
        },
    )


@pytest.fixture(scope="module")
def sft_step_alone(tmp_path_factory, tiny_model_dir) -> dict:
    """One process's step of ``_sft_step_config``: the same step whatever the strategy, which a lone
    process does not apply (it trains the model as it is)."""
    directory = tmp_path_factory.mktemp("sft-step")
    config = _sft_step_config(directory, tiny_model_dir, "ddp")
    run_alone([PYTHON, str(HERE / "data_parallel_rank.py"), "sft", str(config), str(directory / "one.pt")])
    return torch.load(directory / "one.pt")


@pytest.mark.determinism
@pytest.mark.parametrize(("strategy", "grad_rtol"), [("ddp", 1e-6), ("fsdp", None)])  # fsdp: no gradient to read
def test_two_ranks_train_the_sft_step_one_process_trains(tmp_path, tiny_model_dir, sft_step_alone, strategy, grad_rtol):
    config = _sft_step_config(tmp_path, tiny_model_dir, strategy)
    run_ranks(
        [PYTHON, str(HERE / "data_parallel_rank.py"), "sft", str(config), str(tmp_path / "two.pt")],
        2,
        tmp_path / "logs",
    )
    assert_same_step(sft_step_alone, torch.load(tmp_path / "two.pt"), grad_rtol)


# ---- fsdp: sharded parameters and optimizer state -------------------------------------------------


def test_strategy_auto_is_fsdp_on_cuda_for_shardable_models_and_fsdp_refuses_the_rest(tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from veriloop.training._parallel_strategy import strategy_name

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert strategy_name("auto", model, "cpu") == "ddp"
    assert strategy_name("auto", model, "cuda:1") == "fsdp"
    assert strategy_name("fsdp", model, "cpu") == "fsdp"
    assert strategy_name("ddp", model, "cuda") == "ddp"
    lora = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM"))
    assert strategy_name("auto", lora, "cuda") == "ddp"
    with pytest.raises(UserError, match="fsdp shards models the lean decoder runs .* a LoRA policy; use"):
        strategy_name("fsdp", lora, "cpu")


@pytest.mark.determinism
@pytest.mark.parametrize("max_tokens", [0, 40], ids=["padded", "packed"])
def test_fsdp_ranks_train_the_rl_step_one_process_trains_with_the_optimizer_state_halved(
    tmp_path, config_file, max_tokens
):
    from veriloop.training import read_metrics

    # 3 prompts over 2 ranks, 4 rows a micro-batch: rank 0 trains 2 micro-batches, rank 1 one and an
    # idle pass (every FSDP collective needs both ranks). Packed: micro-batches of up to 40 tokens,
    # as many as each rank's rows need, the ranks' counts evened out by idle passes the same way.
    config = config_file(
        rollout={"prompts_per_step": 3},
        algorithm={"dynamic_sampling": False},  # all 3 groups trained: 2 on rank 0, 1 on rank 1
        optim={"warmup_steps": 1, "micro_batch_size": 4, "max_tokens_per_micro_batch": max_tokens},
        pipeline={"torch_threads": 1},
        run={"checkpoint_every": 0, "out": str(tmp_path / "run")},
        distributed={"strategy": "fsdp"},
    )
    script = [PYTHON, str(HERE / "data_parallel_rank.py"), "rl", str(config)]
    run_alone([*script, str(tmp_path / "one.pt")])
    run_ranks([*script, str(tmp_path / "two.pt")], 2, tmp_path / "logs")
    # FSDP sums each micro-batch's gradient over the ranks as it comes ((g1 + g3) + g2 where one
    # process adds g1 + g2 + g3): the same sum in another order, 1e-6 relative apart on the tied
    # embedding, which gathers the most terms.
    assert_same_step(torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt"), grad_rtol=1e-5)
    assert read_metrics(tmp_path / "run")[-1]["groups/kept"] == 3  # so the ranks' micro-batch counts differ
    alone = json.loads((tmp_path / "one.pt.rank0.json").read_text())
    sizes = [json.loads((tmp_path / f"two.pt.rank{rank}.json").read_text()) for rank in range(2)]
    assert alone["local"] == alone["whole"] > 0
    assert [s["whole"] for s in sizes] == [alone["whole"]] * 2
    assert sum(s["local"] for s in sizes) == alone["whole"]  # each element on exactly one rank
    for size in sizes:
        assert 0.4 <= size["local"] / size["whole"] <= 0.6, sizes  # dim-0 halves (odd rows: one more)


def test_fsdp_with_a_model_it_cannot_shard_is_a_one_line_error_on_every_rank(tmp_path, config_file):
    config = config_file(model={"lora_rank": 2}, distributed={"strategy": "fsdp"})
    processes = start_ranks([PYTHON, "-m", "veriloop", "train", str(config)], 2, tmp_path / "logs")
    assert [p.wait(timeout=120) for p in processes] == [2, 2]
    for rank in range(2):
        errors = [
            line
            for line in (tmp_path / "logs" / f"rank{rank}.log").read_text().splitlines()
            if line.startswith("error:")
        ]
        assert errors == [
            "error: distributed.strategy: fsdp shards models the lean decoder runs (Llama, Qwen2 and Mistral "
            "shapes, without LoRA), and this is a LoRA policy; use distributed.strategy=ddp"
        ]


# ---- torchrun: checkpoints across world sizes ----------------------------------------------------


def _checkpoint(out: Path, step: int) -> tuple[dict[str, torch.Tensor], dict]:
    from safetensors.torch import load_file

    directory = out / "checkpoints" / f"step-{step:08d}"
    return load_file(directory / "model" / "model.safetensors"), torch.load(
        directory / "trainer_state.pt", weights_only=False
    )


def _assert_close_to(straight: Path, resumed: Path, step: int) -> None:
    """Weights and AdamW moments of ``step`` agree (the optimizer state crossed the resume)."""
    weights, state = _checkpoint(straight, step)
    other_weights, other_state = _checkpoint(resumed, step)
    for name, tensor in weights.items():
        assert (other_weights[name] - tensor).norm() / tensor.norm() <= ADAM_TENSOR_RTOL, name
    for index, moments in state["optimizer"]["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            mine, theirs = moments[key], other_state["optimizer"]["state"][index][key]
            assert (theirs - mine).norm() <= 1e-3 * mine.norm() + 1e-12, (index, key)
        assert float(other_state["optimizer"]["state"][index]["step"]) == step


def test_checkpoints_resume_across_world_sizes_and_strategies(tmp_path, rl_config, straight):
    """One run handed on at every step: one process, 2 ddp ranks under torchrun, one process, 2 fsdp
    ranks, one process. Each hand-over changes the world size, and the checkpoints of each writer
    (one process, ddp, fsdp) are resumed by another count of ranks: every one must hold the whole
    weights, the whole AdamW moments and the sampler's place, so the run stays the straight one."""
    from safetensors.torch import load_file

    from veriloop.training import read_ledger, read_metrics

    config, out = str(rl_config()), tmp_path / "handed-on"
    train = [PYTHON, "-m", "veriloop", "train", config, f"run.out={out}"]
    run_alone([*train, "run.steps=1"])
    on_ddp = torchrun(2, "train", config, f"run.out={out}", "run.steps=2")
    assert on_ddp.stderr.count("final model:") == 1  # rank 0 alone reports
    assert "resumed from step 1" in on_ddp.stderr
    assert "resumed from step 2" in run_alone([*train, "run.steps=3"]).stderr
    on_fsdp = torchrun(2, "train", config, f"run.out={out}", "run.steps=4", "distributed.strategy=fsdp")
    assert "resumed from step 3" in on_fsdp.stderr
    assert "resumed from step 4" in run_alone([*train, f"run.steps={STRAIGHT_STEPS}"]).stderr

    assert [r["step"] for r in read_metrics(out)] == list(range(1, STRAIGHT_STEPS + 1))
    assert read_ledger(out) == read_ledger(straight)  # the same prompts, each once
    for step in range(1, STRAIGHT_STEPS + 1):  # step 3 reads ddp's checkpoint, step 5 fsdp's
        _assert_close_to(straight, out, step)
    assert not list(out.glob("**/rank*")), "only rank 0 writes"
    expected = load_file(straight / "final" / "model.safetensors")
    final = load_file(out / "final" / "model.safetensors")  # a plain model, as one process saves it
    assert final.keys() == expected.keys()
    for name, tensor in expected.items():
        assert (final[name] - tensor).norm() / tensor.norm() <= ADAM_TENSOR_RTOL, name
    fsdp_written = load_file(out / "checkpoints" / "step-00000004" / "model" / "model.safetensors")
    assert fsdp_written.keys() == expected.keys()  # whole tensors under the plain names, not shards


def test_an_sft_run_of_two_fsdp_ranks_resumes_on_one_process(tmp_path, tiny_model_dir):
    """SFT checkpoints of fsdp ranks hold whole weights and AdamW state: one process resumes them
    and ends where the straight one-process run ends."""
    from safetensors.torch import load_file

    data = tmp_path / "sft.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"{i}?"}, {"role": "assistant", "content": str(i)}]} for i in range(8)
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = write_config(
        tmp_path / "sft.yaml",
        {
            "model": {"path": str(tiny_model_dir)},
            "data": {"train": str(data)},
            "optim": {"batch_size": 4, "lr": 2e-3, "warmup_steps": 1, "steps": 4},
            "run": {"checkpoint_every": 2, "progress": False},
        },
    )
    sft = [PYTHON, "-m", "veriloop", "sft", str(config)]
    run_alone([*sft, f"run.out={tmp_path / 'straight'}"])
    resumed = tmp_path / "resumed"
    run_ranks([*sft, f"run.out={resumed}", "optim.steps=3", "distributed.strategy=fsdp"], 2, tmp_path / "logs")
    assert "resumed from step 3" in run_alone([*sft, f"run.out={resumed}"]).stderr
    expected = load_file(tmp_path / "straight" / "model.safetensors")
    final = load_file(resumed / "model.safetensors")
    assert final.keys() == expected.keys()
    for name, tensor in expected.items():
        assert (final[name] - tensor).norm() / tensor.norm() <= ADAM_TENSOR_RTOL, name


# ---- a lost rank --------------------------------------------------------------------------------


def test_a_killed_rank_ends_the_run_fast_and_a_rerun_resumes(tmp_path, rl_config):
    from veriloop.training import read_metrics

    out = tmp_path / "run"
    config = str(rl_config(out=str(out)))
    command = [PYTHON, "-m", "veriloop", "train", config, "distributed.lost_after_s=3"]
    ranks = start_ranks([*command, "run.steps=1000"], 2, tmp_path / "logs")
    deadline = time.monotonic() + 300
    while not (out / "checkpoints" / "step-00000001").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    ranks[1].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    code = ranks[0].wait(timeout=120)
    waited = time.monotonic() - killed_at
    error = (tmp_path / "logs" / "rank0.log").read_text()
    assert code != 0, error
    assert waited < 30, waited  # seconds (lost_after_s plus exit), not a collective timeout
    assert "rank 1 of 2 lost" in error and "rerun the same command to resume" in error, error[-2000:]

    last = int(sorted((out / "checkpoints").glob("step-*"))[-1].name.split("-")[1])
    run_ranks([*command, f"run.steps={last + 1}"], 2, tmp_path / "rerun")
    assert f"resumed from step {last}" in (tmp_path / "rerun" / "rank0.log").read_text()
    assert [r["step"] for r in read_metrics(out)] == list(range(1, last + 2))
    assert (out / "final" / "model.safetensors").is_file()


# ---- Ray ------------------------------------------------------------------------------------------


def test_ray_ranks_train_the_run_one_process_trains(tmp_path, rl_config, straight):
    """``distributed.ray_ranks=2``: two Ray actors (on a private single-node Ray on loopback) form the
    process group; the run is the single-process run, written once, by rank 0."""
    pytest.importorskip("ray", reason="the Ray launcher needs ray: pip install -e '.[dev]' (make setup)")
    from safetensors.torch import load_file

    from veriloop.training import read_ledger, read_metrics

    config, on_ray = str(rl_config(steps=2)), tmp_path / "ray"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    result = subprocess.run(
        [PYTHON, "-m", "veriloop", "train", config, f"run.out={on_ray}", "distributed.ray_ranks=2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("final model:") == 1
    assert [r["step"] for r in read_metrics(on_ray)] == [1, 2]
    assert [r["reward/sampled_mean"] for r in read_metrics(on_ray)] == [
        r["reward/sampled_mean"] for r in read_metrics(straight)[:2]
    ]
    assert read_ledger(on_ray) == [r for r in read_ledger(straight) if r["step"] <= 2]
    expected = load_file(straight / "checkpoints" / "step-00000002" / "model" / "model.safetensors")
    final = load_file(on_ray / "final" / "model.safetensors")
    for name, tensor in expected.items():
        assert (final[name] - tensor).norm() / tensor.norm() <= ADAM_TENSOR_RTOL, name

"""The ``vllm`` engine on a real in-process vLLM (CPU), checked against the ``hf`` engine's model.

These run in .venv-vllm (``make setup-vllm``; ``make test`` runs them after the main suite);
where vllm is not installed only the test of the error that says so runs.
"""

import asyncio
import importlib.util
import math

import pytest

from veriloop.core import Task, UserError
from veriloop.rollout import EpisodeConfig, SamplingParams, StopConfig, create_engine, rollout

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM: make setup-vllm, then run with .venv-vllm/bin/python")
pytestmark = [pytest.mark.scale, pytest.mark.vllm]

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def vllm_engine(tiny_model_dir):
    engine = create_engine("vllm", model=str(tiny_model_dir), kv_cache_bytes=64 * 2**20, max_model_len=512)
    yield engine
    engine.close()


def _teacher_forced(model, prompt, completion, temperature):
    """(T,) log-probs of ``completion`` after ``prompt`` under ``model`` at ``temperature``."""
    import torch

    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    scaled = logits / temperature if temperature > 0 else logits
    return torch.log_softmax(scaled, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]


def _weights(model):
    return {name: t.detach().clone() for name, t in model.state_dict().items()}


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_without_vllm_building_the_engine_says_how_to_get_it(tiny_model_dir):
    with pytest.raises(UserError, match="make setup-vllm"):
        create_engine("vllm", model=str(tiny_model_dir))


@needs_vllm
def test_a_missing_model_directory_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a model directory"):
        create_engine("vllm", model=str(tmp_path))


@needs_vllm
@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_sampled_logprobs_equal_the_hf_models_teacher_forced_ones(vllm_engine, tiny_engine, temperature):
    import torch

    prompt = vllm_engine.encode_prompt(CHAT)
    assert prompt == tiny_engine.encode_prompt(CHAT)
    params = SamplingParams(n=4, max_tokens=12, temperature=temperature, seed=3, ignore_eos=True)
    [samples] = vllm_engine.generate([prompt], params)
    assert len(samples) == 4
    for sample in samples:
        assert len(sample.token_ids) == 12 and sample.finish_reason == "length"
        assert sample.text == vllm_engine.tokenizer.decode(list(sample.token_ids), skip_special_tokens=False)
        expected = _teacher_forced(tiny_engine.model, prompt, sample.token_ids, temperature)
        assert torch.allclose(expected, torch.tensor(sample.logprobs), atol=1e-4), (expected, sample.logprobs)


@needs_vllm
def test_truncated_sampling_reports_the_log_probs_of_the_cut_distribution(vllm_engine, tiny_engine):
    """top_k/top_p: vLLM's processed log-probs are those the trainer scores (``truncated_logprobs``)."""
    import torch

    from veriloop.rollout import truncated_logprobs

    prompt = vllm_engine.encode_prompt(CHAT)
    params = SamplingParams(n=4, max_tokens=12, temperature=0.8, top_k=40, top_p=0.7, seed=5, ignore_eos=True)
    ids = torch.tensor([list(prompt)])
    for sample in vllm_engine.generate([prompt], params)[0]:
        completion = torch.tensor(sample.token_ids)
        with torch.inference_mode():
            logits = tiny_engine.model(input_ids=torch.cat([ids[0], completion])[None]).logits[0].float()
        scaled = logits[len(prompt) - 1 : -1] / params.temperature  # (T, V)
        expected = truncated_logprobs(scaled, completion, params.top_k, params.top_p)
        assert torch.allclose(expected, torch.tensor(sample.logprobs), atol=1e-4), (expected, sample.logprobs)
        full = torch.log_softmax(scaled, -1).gather(-1, completion[:, None])[:, 0]
        assert torch.all(expected > full + 1e-3)  # the cut renormalises: every kept token gains mass


@needs_vllm
def test_a_sample_depends_on_its_seed_not_its_batch(vllm_engine):
    params = SamplingParams(n=3, max_tokens=16, seed=11, ignore_eos=True)
    alone = vllm_engine.generate([CHAT], params)[0]
    batched = vllm_engine.generate([[1, 2, 3], CHAT, [5, 6]], params)[1]
    assert [s.token_ids for s in alone] == [s.token_ids for s in batched]
    assert len({s.token_ids for s in alone}) == 3  # sample j has seed 11 + j
    other = vllm_engine.generate([CHAT], params.model_copy(update={"seed": 12}))[0]
    assert other[0].token_ids == alone[1].token_ids  # seed 12 is sample 1 of seed 11
    assert other[2].token_ids not in {s.token_ids for s in alone}


@needs_vllm
def test_a_batch_longer_than_one_step_samples_as_its_prompts_alone(vllm_engine):
    """Prompts that together exceed the tokens vLLM takes in one step: each is prefilled whole in
    some step (cut across steps, a seeded request fails on a CPU) and samples as it does alone."""
    prompts = [[1 + (i * 7 + j) % 50 for j in range(400)] for i in range(32)]  # 12,800 prompt tokens
    params = SamplingParams(n=2, max_tokens=8, seed=3, ignore_eos=True)
    batched = vllm_engine.generate(prompts, params)
    assert [len(samples) for samples in batched] == [2] * 32
    for index in (0, 17, 31):
        alone = vllm_engine.generate([prompts[index]], params)[0]
        assert [s.token_ids for s in alone] == [s.token_ids for s in batched[index]]


@needs_vllm
def test_the_callers_random_state_is_left_alone(vllm_engine):
    import torch

    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    vllm_engine.generate([CHAT], SamplingParams(max_tokens=4, seed=1))
    assert torch.equal(torch.rand(3), expected)


@needs_vllm
def test_stop_strings_end_a_sample_and_stay_in_its_text(vllm_engine):
    greedy = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    first = vllm_engine.generate([CHAT], greedy)[0][0]
    assert vllm_engine.generate([CHAT], greedy)[0][0].token_ids == first.token_ids
    stop_at = vllm_engine.tokenizer.decode(list(first.token_ids[5:6]))
    prefix = vllm_engine.tokenizer.decode(list(first.token_ids[:6]))
    stopped = vllm_engine.generate([CHAT], greedy.model_copy(update={"stop": (stop_at,)}))[0][0]
    assert stopped.finish_reason == "stop"
    assert stop_at in stopped.text and len(stopped.token_ids) <= 6
    assert prefix.startswith(stopped.text) and len(stopped.logprobs) == len(stopped.token_ids)


@needs_vllm
def test_max_tokens_and_end_of_sequence_finish_reasons(vllm_engine):
    eos = next(iter(vllm_engine.eos_token_ids))
    sampled = vllm_engine.generate([CHAT], SamplingParams(n=8, max_tokens=40, seed=0))[0]
    for sample in sampled:
        assert len(sample.token_ids) <= 40
        if sample.finish_reason == "eos":
            assert sample.token_ids[-1] == eos
        else:
            assert sample.finish_reason == "length" and len(sample.token_ids) == 40 and eos not in sample.token_ids


@needs_vllm
def test_repetition_stop_cuts_where_the_hf_engine_stops(vllm_engine):
    from veriloop.rollout import repeating_block

    greedy = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
    free = vllm_engine.generate([CHAT], greedy)[0][0]
    cut = vllm_engine.generate([CHAT], greedy.model_copy(update={"repetition_stop": 3}))[0][0]
    ends = [end for end in range(8, 65, 8) if repeating_block(list(free.token_ids[:end]), 3)]
    if ends:
        assert cut.finish_reason == "repetition" and cut.token_ids == free.token_ids[: ends[0]]
    else:
        assert cut.token_ids == free.token_ids and cut.finish_reason == "length"


@needs_vllm
def test_agenerate_batches_concurrent_calls_without_blocking_the_loop(vllm_engine):
    params = [SamplingParams(max_tokens=24, seed=s, ignore_eos=True) for s in range(6)]
    calls = []
    original = vllm_engine.sample_rows

    def counting(rows, row_params):
        calls.append(len(rows))
        return original(rows, row_params)

    async def main():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        ticking = asyncio.create_task(ticker())
        results = await asyncio.gather(*(vllm_engine.agenerate([CHAT], p) for p in params))
        done.set()
        await ticking
        return results, ticks

    vllm_engine.sample_rows = counting
    try:
        results, ticks = asyncio.run(main())
    finally:
        del vllm_engine.sample_rows
    assert calls == [6]
    assert ticks >= 3  # the loop ran while vLLM sampled
    for p, result in zip(params, results):
        assert result[0][0].token_ids == vllm_engine.generate([CHAT], p)[0][0].token_ids


@needs_vllm
def test_requests_that_trickle_in_share_one_vllm_call(vllm_engine):
    # Requests arriving over several passes of the event loop (episodes coming back one at a time
    # after a batch) go into one call, not one call for the first and another for the rest.
    params = [SamplingParams(max_tokens=8, seed=s) for s in range(6)]
    calls = []
    original = vllm_engine.sample_rows

    def counting(rows, row_params):
        calls.append(len(rows))
        return original(rows, row_params)

    async def after_passes(p, passes):
        for _ in range(passes):
            await asyncio.sleep(0)
        return await vllm_engine.agenerate([CHAT], p)

    async def main():
        return await asyncio.gather(*(after_passes(p, 2 * i) for i, p in enumerate(params)))

    vllm_engine.sample_rows = counting
    try:
        asyncio.run(main())
    finally:
        del vllm_engine.sample_rows
    assert calls == [6]


@needs_vllm
def test_partial_and_full_weight_pushes(vllm_engine, tiny_engine, tiny_model_dir):
    import torch

    params = SamplingParams(n=2, max_tokens=10, seed=7, ignore_eos=True)
    before = vllm_engine.generate([CHAT], params)[0]
    original = _weights(tiny_engine.model)
    vocab = tiny_engine.model.config.vocab_size
    try:
        # Partial: a zero final norm makes every logit 0, so every token has log-prob -ln(vocab).
        vllm_engine.update_weights({"model.norm.weight": torch.zeros_like(original["model.norm.weight"])}, 1)
        assert vllm_engine.policy_version == 1
        for sample in vllm_engine.generate([CHAT], params)[0]:
            assert all(abs(lp + math.log(vocab)) < 1e-5 for lp in sample.logprobs)
        vllm_engine.update_weights({"model.norm.weight": original["model.norm.weight"]}, 2)
        assert [s.token_ids for s in vllm_engine.generate([CHAT], params)[0]] == [s.token_ids for s in before]
        # Tied embeddings: lm_head.weight is the embedding matrix; zero logits again.
        vllm_engine.update_weights({"lm_head.weight": torch.zeros_like(original["lm_head.weight"])}, 3)
        assert all(abs(lp + math.log(vocab)) < 1e-5 for lp in vllm_engine.generate([CHAT], params)[0][0].logprobs)
        vllm_engine.update_weights({"lm_head.weight": original["lm_head.weight"]}, 3)
        assert [s.token_ids for s in vllm_engine.generate([CHAT], params)[0]] == [s.token_ids for s in before]
        # Partial, one fused layer (q, k, v with their biases) and the embedding; then full: another
        # model's weights. The log-probs are the hf model's with the same weights.
        torch.manual_seed(1)
        other = {name: t + 0.05 * torch.randn_like(t) for name, t in original.items()}
        other["lm_head.weight"] = other["model.embed_tokens.weight"]
        attention = {n: t for n, t in other.items() if n.startswith("model.layers.1.self_attn.") and "o_proj" not in n}
        assert len(attention) == 6
        prompt = vllm_engine.encode_prompt(CHAT)
        for version, pushed in enumerate([attention, {"model.embed_tokens.weight": other["lm_head.weight"]}, other]):
            vllm_engine.update_weights(pushed, 4 + version)
            tiny_engine.update_weights(pushed, 4 + version)
            for sample in vllm_engine.generate([prompt], params)[0]:
                expected = _teacher_forced(tiny_engine.model, prompt, sample.token_ids, 1.0)
                assert torch.allclose(expected, torch.tensor(sample.logprobs), atol=1e-4), version
        with pytest.raises(KeyError, match="not.a.weight"):
            vllm_engine.update_weights({"not.a.weight": torch.zeros(1)}, 5)
        with pytest.raises(ValueError, match="k_proj.bias"):
            vllm_engine.update_weights(
                {"model.layers.0.self_attn.q_proj.weight": original["model.layers.0.self_attn.q_proj.weight"]}, 5
            )
        assert vllm_engine.policy_version == 6
    finally:
        vllm_engine.update_weights(original, 0)
        tiny_engine.update_weights(original, 0)
    assert [s.token_ids for s in vllm_engine.generate([CHAT], params)[0]] == [s.token_ids for s in before]


@pytest.fixture(scope="module")
def scripted_vllm(scripted_engine, tmp_path_factory):
    """The hf engine's scripted model (tests/rollout/conftest.py), saved and served by vLLM."""
    from veriloop.training._model import save_final

    directory = save_final(scripted_engine.model, scripted_engine.tokenizer, tmp_path_factory.mktemp("scripted-vllm"))
    engine = create_engine("vllm", model=str(directory), kv_cache_bytes=32 * 2**20, max_model_len=512)
    yield engine
    engine.close()


@needs_vllm
def test_a_multi_turn_episode_is_the_hf_engines_and_carries_the_policy_version(scripted_vllm, scripted_engine):
    """Verifier feedback, then a second answer: the same tokens as the hf engine (greedy), the
    same log-probs, though later turns continue from vLLM's prefix cache."""
    import torch

    task = Task(id="add", domain="arith", prompt="What is 2+2?", verifier={"kind": "exact"}, gold="4")
    config = EpisodeConfig(
        temperature=0, max_tokens_per_turn=48, tools=("submit",), feedback_on_fail=True, stop=StopConfig(max_turns=3)
    )
    scripted_vllm.update_weights(None, 9)
    [trajectory] = rollout([task], scripted_vllm, config).trajectories
    [expected] = rollout([task], scripted_engine, config).trajectories
    assert [t.role for t in trajectory.turns] == ["assistant", "observation", "assistant"]
    assert trajectory.response == "4" and trajectory.reward == 1.0 and trajectory.stop_reason == "done"
    assert trajectory.policy_version == 9
    assert trajectory.prompt_ids == expected.prompt_ids and trajectory.completion_ids == expected.completion_ids
    assert torch.allclose(torch.tensor(trajectory.logprobs), torch.tensor(expected.logprobs), atol=1e-4)

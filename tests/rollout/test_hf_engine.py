import asyncio

import pytest

from veriloop.core import UserError
from veriloop.rollout import SamplingParams, create_engine, repeating_block

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


def test_samples_carry_ids_logprobs_and_decode_to_their_text(tiny_engine):
    [samples] = tiny_engine.generate([CHAT], SamplingParams(n=3, max_tokens=10, seed=1))
    assert len(samples) == 3
    for sample in samples:
        assert 1 <= len(sample.token_ids) <= 10
        assert len(sample.logprobs) == len(sample.token_ids)
        assert all(lp <= 0 for lp in sample.logprobs)
        assert sample.text == tiny_engine.tokenizer.decode(list(sample.token_ids), skip_special_tokens=False)
        assert sample.finish_reason in ("eos", "length", "repetition")


def test_a_sample_depends_on_its_seed_not_its_batch(tiny_engine):
    params = SamplingParams(n=2, max_tokens=12, seed=11)
    alone = tiny_engine.generate([CHAT], params)[0]
    batched = tiny_engine.generate([[1, 2, 3], CHAT, [5]], params)[1]
    assert [s.token_ids for s in alone] == [s.token_ids for s in batched]
    other_seed = tiny_engine.generate([CHAT], params.model_copy(update={"seed": 12}))[0]
    assert other_seed[0].token_ids != alone[0].token_ids


def test_logprobs_match_a_fresh_forward_pass(tiny_engine):
    import torch

    prompt = tiny_engine.encode_prompt(CHAT)
    [[sample]] = tiny_engine.generate([prompt], SamplingParams(max_tokens=8, seed=3, temperature=0.7))
    ids = torch.tensor([prompt + list(sample.token_ids)])
    with torch.inference_mode():
        logits = tiny_engine.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / 0.7
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(sample.token_ids)[:, None])[:, 0]
    assert torch.allclose(expected, torch.tensor(sample.logprobs), atol=1e-4)


def test_greedy_is_deterministic_and_stop_strings_end_a_sample(tiny_engine):
    greedy = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    first = tiny_engine.generate([CHAT], greedy)[0][0]
    assert tiny_engine.generate([CHAT], greedy)[0][0].token_ids == first.token_ids
    # Stop at the text of the sixth generated token: sampling must end there, not at 16 tokens.
    stop_at = tiny_engine.tokenizer.decode(list(first.token_ids[5:6]))
    prefix = tiny_engine.tokenizer.decode(list(first.token_ids[:6]))
    stopped = tiny_engine.generate([CHAT], greedy.model_copy(update={"stop": (stop_at,)}))[0][0]
    assert stopped.finish_reason == "stop"
    assert stop_at in stopped.text and len(stopped.token_ids) <= 6
    assert stopped.text == tiny_engine.tokenizer.decode(list(stopped.token_ids)) and prefix.startswith(stopped.text)


@pytest.mark.determinism
@pytest.mark.parametrize("passes_apart", [0, 2])
def test_concurrent_requests_are_batched_and_equal_to_sync(tiny_engine, passes_apart):
    # passes_apart=2: the requests trickle in over several passes of the event loop, as after a
    # batch ends (its episodes come back one at a time, each when its verification returns, then
    # another waiting for a slot). The first must not be sampled alone (a full run of decode
    # steps for one row) while the others queue behind it.
    params = [SamplingParams(max_tokens=6, seed=s) for s in range(6)]
    calls = []
    original = tiny_engine.sample_rows

    def counting(rows, p, *limits):
        calls.append(len(rows))
        return original(rows, p, *limits)

    async def after_passes(p, passes):
        for _ in range(passes):
            await asyncio.sleep(0)
        return await tiny_engine.agenerate([CHAT], p)

    async def main():
        return await asyncio.gather(*(after_passes(p, passes_apart * i) for i, p in enumerate(params)))

    tiny_engine.sample_rows = counting
    try:
        results = asyncio.run(main())
    finally:
        del tiny_engine.sample_rows
    assert calls == [6]
    for p, result in zip(params, results):
        assert result[0][0].token_ids == tiny_engine.generate([CHAT], p)[0][0].token_ids


def test_repetition_detector():
    assert repeating_block([5, 1, 2, 3, 1, 2, 3, 1, 2, 3], min_repeats=3) == 3
    assert repeating_block([1, 2, 3, 4, 5, 6], min_repeats=2) is None
    assert repeating_block([7] * 5, min_repeats=3) is None  # single token needs twice as many
    assert repeating_block([7] * 6, min_repeats=3) == 1


def test_missing_model_directory_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a model directory"):
        create_engine("hf", model=str(tmp_path))


def test_unknown_engine_lists_known_ones():
    with pytest.raises(UserError, match="known: hf, openai"):
        create_engine("tgi")


def test_update_weights_loads_a_subset_and_rejects_unknown_names(tiny_model_dir):
    import torch

    from veriloop.rollout import HFEngine

    engine = HFEngine(tiny_model_dir)
    name, weight = next(iter(engine.model.named_parameters()))
    engine.update_weights({name: torch.zeros_like(weight)}, version=3)
    assert engine.policy_version == 3 and torch.count_nonzero(dict(engine.model.named_parameters())[name]) == 0
    with pytest.raises(KeyError, match="not_a_weight"):
        engine.update_weights({"not_a_weight": torch.zeros(1)}, version=4)


@pytest.mark.determinism
def test_a_shared_prompt_is_prefilled_once_and_samples_do_not_depend_on_it(tiny_model_dir):
    """Bit for bit, with the default thread count: the promise is that a sample depends on its seed
    only, and a log-prob off in its last bit would, over enough tokens, become another token.
    It holds because MKL runs in strict mode (veriloop.core._blas)."""
    engine = create_engine("hf", model=str(tiny_model_dir))
    widths = []
    forward = engine.lean.forward
    engine.lean.forward = lambda ids, *args, **kwargs: (widths.append(tuple(ids.shape)), forward(ids, *args, **kwargs))[
        1
    ]
    other = [{"role": "user", "content": "Say something long enough to pad the other prompt."}]
    params = SamplingParams(n=4, max_tokens=10, seed=7)
    shared = engine.generate([CHAT, other], params)
    assert widths[0][0] == 2  # two distinct prompts prefilled for eight rows
    alone = [engine.generate([CHAT], params)[0], engine.generate([other], params)[0]]
    for together, by_itself in zip(shared, alone):
        assert [(s.token_ids, s.logprobs) for s in together] == [(s.token_ids, s.logprobs) for s in by_itself]


def test_a_cuda_device_without_cuda_is_a_user_error(tiny_model_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(UserError, match="no CUDA device"):
        create_engine("hf", model=str(tiny_model_dir), device="cuda")


@pytest.mark.determinism
def test_requests_with_different_budgets_share_a_batch_and_each_stops_at_its_own(tiny_engine):
    """Budgets 3 and 12 in one batch: the short row stops at 3 tokens, the long one goes on to 12,
    and each equals the sample its seed gives alone (the batch mate's budget changes nothing)."""
    short = SamplingParams(max_tokens=3, seed=21, ignore_eos=True)
    long = SamplingParams(max_tokens=12, seed=22, ignore_eos=True)
    calls = []
    original = tiny_engine.sample_rows

    def counting(rows, p, *limits):
        calls.append(list(*limits))
        return original(rows, p, *limits)

    async def main():
        return await asyncio.gather(tiny_engine.agenerate([CHAT], short), tiny_engine.agenerate([CHAT], long))

    tiny_engine.sample_rows = counting
    try:
        [[[first]], [[second]]] = asyncio.run(main())
    finally:
        del tiny_engine.sample_rows
    assert calls == [[3, 12]]  # one batch, each row with its own budget
    assert (len(first.token_ids), first.finish_reason) == (3, "length")
    assert (len(second.token_ids), second.finish_reason) == (12, "length")
    assert first.token_ids == tiny_engine.generate([CHAT], short)[0][0].token_ids
    assert second.token_ids == tiny_engine.generate([CHAT], long)[0][0].token_ids
    with pytest.raises(ValueError, match="one budget >= 1 per row"):
        tiny_engine.sample_rows([(tiny_engine.encode_prompt(CHAT), 1)], short, [0])

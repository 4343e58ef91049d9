"""Keys and values kept across the turns of a session: what is prefilled, and what is sampled."""

import pytest
import torch

from veriloop.rollout import HFEngine, SamplingParams
from veriloop.rollout._kv_sessions import KVSessions

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]
TURNS = 4


def _observation(turn: int) -> list[int]:
    return [int(t) for t in torch.randint(3, 250, (25,), generator=torch.Generator().manual_seed(turn))]


def _conversation(engine: HFEngine, session: str | None) -> tuple[list, list[int]]:
    """Samples of TURNS turns, each followed by an observation; the prefill tokens of each turn."""
    context = engine.encode_prompt(CHAT)
    samples, prefilled = [], []
    for turn in range(TURNS):
        before = engine.prefill_tokens
        params = SamplingParams(max_tokens=24, seed=40 + turn)
        [[sample]] = engine.generate([context], params, sessions=[session] if session else None)
        prefilled.append(engine.prefill_tokens - before)
        samples.append(sample)
        context = context + list(sample.token_ids) + _observation(turn)
    return samples, prefilled


@pytest.fixture(params=["lean", "transformers"])
def engines(request, tiny_engine):
    """An engine that keeps sessions and one that re-prefills, over the same weights."""
    lean = request.param == "lean"
    model, tokenizer = tiny_engine.model, tiny_engine.tokenizer
    reuse = HFEngine(model, tokenizer, lean=lean)
    assert (reuse.lean is not None) == lean
    return reuse, HFEngine(model, tokenizer, lean=lean, kv_reuse=False)


@pytest.mark.determinism
def test_a_session_prefills_only_new_tokens_and_samples_what_a_reprefill_samples(engines):
    reuse, reprefill = engines
    kept, kept_prefill = _conversation(reuse, "episode-1")
    fresh, fresh_prefill = _conversation(reprefill, None)
    prompt = len(reuse.encode_prompt(CHAT))
    # Turn 1 prefills the prompt; each later turn the previous turn's last token and the observation.
    assert kept_prefill == [prompt] + [1 + 25] * (TURNS - 1)
    assert fresh_prefill[0] == prompt and fresh_prefill[-1] > 3 * kept_prefill[-1]
    for a, b in zip(kept, fresh):
        assert a.token_ids == b.token_ids  # the same samples
        # Log-probs agree to float32 rounding: attention kernels round a query's result differently
        # with the number of keys and queries in the call (see _kv_sessions).
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=0)


@pytest.mark.e2e
@pytest.mark.determinism
def test_a_session_is_bit_for_bit_repeatable(engines):
    reuse, _ = engines
    first, _ = _conversation(reuse, "episode-a")
    second, _ = _conversation(reuse, "episode-b")
    assert [(s.token_ids, s.logprobs) for s in first] == [(s.token_ids, s.logprobs) for s in second]


def test_a_weight_update_or_an_ended_session_forgets_the_kept_keys(tiny_engine):
    engine = HFEngine(tiny_engine.model, tiny_engine.tokenizer)
    context = engine.encode_prompt(CHAT)
    params = SamplingParams(max_tokens=8, seed=1)
    [[sample]] = engine.generate([context], params, sessions=["s"])
    longer = context + list(sample.token_ids) + [5, 6, 7]
    engine.update_weights(None, engine.policy_version + 1)
    before = engine.prefill_tokens
    engine.generate([longer], params, sessions=["s"])
    assert engine.prefill_tokens - before == len(longer)  # nothing reused from the old weights
    assert len(engine.sessions) == 1
    engine.end_session("s")
    assert len(engine.sessions) == 0 and engine.sessions.nbytes == 0


def test_a_context_rewritten_in_the_middle_reuses_what_comes_before_the_rewrite(tiny_engine):
    engine = HFEngine(tiny_engine.model, tiny_engine.tokenizer)
    context = engine.encode_prompt(CHAT) + list(range(10, 60))
    params = SamplingParams(max_tokens=4, seed=2)
    [[sample]] = engine.generate([context], params, sessions=["s"])
    rewritten = context[:30] + [7, 7, 7] + context[40:] + list(sample.token_ids)
    before = engine.prefill_tokens
    [[again]] = engine.generate([rewritten], params, sessions=["s"])
    assert engine.prefill_tokens - before == len(rewritten) - 30
    [[plain]] = HFEngine(engine.model, engine.tokenizer, kv_reuse=False).generate([rewritten], params)
    assert again.token_ids == plain.token_ids


def test_sessions_need_one_key_per_prompt_and_one_sample(tiny_engine):
    with pytest.raises(ValueError, match="one per prompt"):
        tiny_engine.generate([CHAT], SamplingParams(n=2, max_tokens=2), sessions=["s"])
    with pytest.raises(ValueError, match="one per prompt"):
        tiny_engine.generate([CHAT, CHAT], SamplingParams(max_tokens=2), sessions=["s"])


def test_kept_sessions_are_evicted_least_recently_used_past_their_bytes():
    layer = (torch.zeros(2, 10, 4), torch.zeros(2, 10, 4))  # 320 bytes each, 640 per entry
    sessions = KVSessions(max_bytes=1500)
    sessions.keep("a", range(10), [layer], version=0)
    sessions.keep("b", range(10), [layer], version=0)
    assert sessions.reusable("a", list(range(12)), version=0)[0] == 10  # "a" is now the most recent
    sessions.keep("c", range(10), [layer], version=0)
    assert sessions.reusable("b", list(range(12)), version=0)[0] == 0  # evicted
    assert sessions.reusable("a", list(range(12)), version=0)[0] == 10
    assert sessions.reusable("a", list(range(12)), version=1)[0] == 0  # other weights
    kept, layers = sessions.reusable("a", list(range(5)), version=0)
    assert kept == 4 and layers[0][0].shape == (2, 4, 4)  # the last token is always prefilled
    sessions.keep("big", range(10), [layer] * 3, version=0)
    assert sessions.reusable("big", list(range(12)), version=0)[0] == 0 and sessions.nbytes <= 1500

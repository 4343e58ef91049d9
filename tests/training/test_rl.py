import pytest
import torch

from veriloop.rollout import TrajectoryStore
from veriloop.training import RLTrainer, read_metrics

pytestmark = pytest.mark.e2e


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_rl_changes_the_weights_and_raises_the_reward(make_config, digit_tasks):
    trainer = RLTrainer(make_config(run={"steps": 14}), tasks=digit_tasks)
    before = _weights(trainer.model)
    history = trainer.train()
    after = _weights(trainer.model)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    early = sum(m["reward/sampled_mean"] for m in history[:3]) / 3
    late = sum(m["reward/sampled_mean"] for m in history[-3:]) / 3
    assert late > early + 0.15, (early, late)
    out = trainer.out
    assert (out / "final" / "config.json").exists()
    records = read_metrics(out)
    assert [r["step"] for r in records] == list(range(1, 15))
    assert all(r["policy_version"] == r["step"] for r in records if "policy_version" in r)
    stored = list(TrajectoryStore(out / "trajectories"))
    assert stored and {t.policy_version for t in stored} == set(range(0, 14))


@pytest.mark.determinism
def test_gradient_accumulation_4x2_equals_8x1(make_config, digit_tasks):
    """Same batch, micro-batches of 2 (x4) or 8 (x1): the same gradient within rounding (sums in
    another order), hence the same update; the samples themselves are equal token for token."""
    from veriloop.algorithms import compute_advantages
    from veriloop.training._batch import token_batch
    from veriloop.training._objective import LossInputs

    results = []
    for micro in (8, 2):
        # No clipping (the norm bound is out of reach), so the gradients left after the update are the accumulated ones.
        optim = {"micro_batch_size": micro, "max_grad_norm": 1e9}
        trainer = RLTrainer(
            make_config(name=f"acc{micro}", optim=optim, rollout={"prompts_per_step": 1}), tasks=digit_tasks
        )
        groups = trainer._sample_groups(1).groups
        trajectories = [t for g in groups for t in g]
        batch = token_batch(trajectories, trainer.engine.pad_token_id)
        advantages = compute_advantages("grpo", torch.tensor([t.reward for t in trajectories]), 8)
        trainer._update(LossInputs(batch, batch.sampler_logprobs, advantages))
        grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        results.append((grads, [t.completion_ids for t in trajectories]))
    (big, samples_big), (small, samples_small) = results
    assert samples_big == samples_small
    assert big.keys() == small.keys() and big
    for key in big:
        assert torch.allclose(big[key], small[key], rtol=1e-4, atol=1e-7), key


def test_sampler_logprobs_match_recomputed_ones(make_config, digit_tasks):
    trainer = RLTrainer(make_config(algorithm={"recompute_logprobs": True}, run={"steps": 1}), tasks=digit_tasks)
    metrics = trainer.step()
    assert metrics["mismatch/abs_logprob_diff_mean"] < 1e-4


def test_bfloat16_sampling_and_autocast_train_float32_weights(make_config, digit_tasks):
    """rollout.dtype=bfloat16 samples from a bfloat16 snapshot (its log-probs differ from the
    float32 policy's by bfloat16 rounding, and are measured); optim.autocast=bfloat16 computes the
    passes in bfloat16 while the weights, their gradients and AdamW stay float32."""
    config = make_config(
        rollout={"dtype": "bfloat16"},
        optim={"autocast": "bfloat16"},
        algorithm={"recompute_logprobs": True},
        run={"steps": 1},
    )
    trainer = RLTrainer(config, tasks=digit_tasks)
    before = _weights(trainer.model)
    metrics = trainer.step()
    assert 0 < metrics["mismatch/abs_logprob_diff_mean"] < 0.1
    after = _weights(trainer.model)
    assert all(v.dtype == torch.float32 for v in after.values())
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in trainer.model.parameters())


def test_a_sampling_precision_for_the_vllm_engine_is_refused(make_config):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="applies to the hf engine"):
        make_config(rollout={"dtype": "bfloat16", "engine": "vllm"})


def test_kl_penalty_and_reference_model(make_config, digit_tasks):
    trainer = RLTrainer(make_config(algorithm={"beta": 0.1, "entropy_coef": 0.01}, run={"steps": 2}), tasks=digit_tasks)
    history = trainer.train()
    assert trainer.reference is not None
    assert history[0]["kl"] == 0.0 or abs(history[0]["kl"]) < 1e-5  # identical weights on step 1
    assert history[1]["kl"] > 0 and history[1]["entropy"] > 0


def test_lora_path_trains_adapters_only(make_config, digit_tasks, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    trainer = RLTrainer(
        make_config(model={"lora_rank": 4}, algorithm={"beta": 0.05}, run={"steps": 2}), tasks=digit_tasks
    )
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    history = trainer.train()
    assert history[-1]["kl"] >= 0
    merged = AutoModelForCausalLM.from_pretrained(trainer.out / "final")
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert any(not torch.equal(a, b) for a, b in zip(merged.state_dict().values(), base.state_dict().values()))


def test_overlong_mask_excludes_cut_answers(make_config, digit_tasks):
    trainer = RLTrainer(
        make_config(algorithm={"overlong": "mask"}, rollout={"max_tokens": 3}, run={"steps": 1}), tasks=digit_tasks
    )
    groups = trainer._sample_groups(1).groups
    trajectories = [t for g in groups for t in g]
    _, keep = trainer._shaped_rewards(trajectories)
    assert keep.tolist() == [0.0 if t.stop_reason == "max_tokens" else 1.0 for t in trajectories]
    penalised = RLTrainer(
        make_config(name="pen", algorithm={"overlong": "penalty", "overlong_buffer": 2}, rollout={"max_tokens": 3}),
        tasks=digit_tasks,
    )
    rewards, _ = penalised._shaped_rewards(trajectories)
    for t, shaped in zip(trajectories, rewards.tolist()):
        length = sum(t.loss_mask)
        expected = t.reward - min(1.0, max(0, length - 1) / 2) if length > 1 else t.reward
        assert abs(shaped - expected) < 1e-6


def test_overlong_shaping_measures_each_sample_against_its_own_domains_budget(make_config, digit_tasks):
    """The "format" tasks may write 3 tokens a turn, the "long" ones 8 (sampled in the same
    batches); the penalty starts 2 tokens before each sample's own budget."""
    tasks = digit_tasks[:8] + [t.model_copy(update={"domain": "long"}) for t in digit_tasks[8:]]
    rollout = {"max_tokens": 3, "max_tokens_by_domain": {"long": 8}, "prompts_per_step": 16, "group_size": 2}
    algorithm = {"overlong": "penalty", "overlong_buffer": 2}
    trainer = RLTrainer(make_config(algorithm=algorithm, rollout=rollout), tasks=tasks)
    trajectories = [t for g in trainer._sample_groups(1).groups for t in g]
    trainer.close()
    lengths = {domain: [sum(t.loss_mask) for t in trajectories if t.domain == domain] for domain in ("format", "long")}
    assert max(lengths["format"]) <= 3 < max(lengths["long"]) <= 8
    rewards, _ = trainer._shaped_rewards(trajectories)
    for t, shaped in zip(trajectories, rewards.tolist()):
        budget, length = {"format": 3, "long": 8}[t.domain], sum(t.loss_mask)
        expected = t.reward - min(1.0, (length - (budget - 2)) / 2) if length > budget - 2 else t.reward
        assert abs(shaped - expected) < 1e-6


def test_domain_budgets_load_from_overrides_and_bad_ones_are_one_line_errors(run_cli, config_file):
    from veriloop.core import UserError
    from veriloop.training import episode_config, load_config

    config = load_config(None, ["rollout.max_tokens=64", "rollout.max_tokens_by_domain={cad: 400}"])
    episode = episode_config(config)
    assert (episode.max_tokens_for("cad"), episode.max_tokens_for("code")) == (400, 64)
    assert episode.stop.max_total_tokens == 400 * 4  # covers the largest turn
    for bad in ("0", "-2", "2.5", "lots"):
        with pytest.raises(
            UserError, match=f"domain 'cad': {bad if bad != 'lots' else repr(bad)} is not a token budget"
        ):
            load_config(None, [f"rollout.max_tokens_by_domain={{cad: {bad}}}"])
    with pytest.raises(UserError, match=r"context_budget \(100\) must exceed max_tokens .* \(largest: 400\)"):
        load_config(None, ["rollout.max_tokens_by_domain={cad: 400}", "rollout.context_budget=100"])
    result = run_cli("train", str(config_file()), "rollout.max_tokens_by_domain={cad: 0}")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "give a whole number >= 1, e.g. {cad: 400}" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_lean_logprobs_share_each_prompt_and_equal_the_model(make_config, digit_tasks):
    from veriloop.training._batch import _shared_prompts, completion_logprobs, token_batch

    trainer = RLTrainer(make_config(rollout={"prompts_per_step": 3, "group_size": 4}), tasks=digit_tasks)
    groups = trainer._sample_groups(1).groups
    trainer.close()
    batch = token_batch([t for group in groups for t in group], trainer.engine.pad_token_id)
    prefix_ids, _, row_prefix, _, _ = _shared_prompts(batch, "cpu")
    assert prefix_ids.shape[0] == len(groups) and row_prefix.tolist() == [
        g for g in range(len(groups)) for _ in range(4)
    ]
    model = trainer.model.double()
    results = []
    for lean in (trainer.engine.lean, None):
        model.zero_grad()
        logprobs, entropy = completion_logprobs(model, batch, 0.7, with_entropy=True, lean=lean)
        ((logprobs + entropy) * batch.loss_mask).sum().backward()
        results.append(
            (logprobs * batch.loss_mask, entropy * batch.loss_mask, [p.grad.clone() for p in model.parameters()])
        )
    (lean_logprobs, lean_entropy, lean_grads), (logprobs, entropy, grads) = results
    # In float64 the two differ only by the rotary angles (fp32 in the lean pass, fp64 in the
    # model after .double()): ~1e-7 of each tensor's scale, where any mix-up of prompts is O(1).
    assert torch.allclose(lean_logprobs, logprobs, atol=1e-6) and torch.allclose(lean_entropy, entropy, atol=1e-6)
    for shared, expected in zip(lean_grads, grads):
        assert (shared - expected).abs().max() <= 1e-6 * expected.abs().max()

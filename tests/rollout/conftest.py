import shutil

import pytest

FEEDBACK = "Expected a different answer; got '3'."
FEEDBACK_CHAT = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "<submit>3</submit>"},
    {"role": "tool", "content": FEEDBACK},
    {"role": "assistant", "content": "<submit>4</submit>"},
]
TOOL_CHAT = [
    {"role": "user", "content": "Use Python to compute 6*7."},
    {"role": "assistant", "content": "<run_python>print(6*7)</run_python>"},
    {"role": "tool", "content": "42\n"},
    {"role": "assistant", "content": "<submit>42</submit>"},
]


STUBBORN_PROMPT = "Divide 1 by 0 in Python."


@pytest.fixture(scope="session")
def sandbox():
    from veriloop.sandbox import Limits, Sandbox

    with Sandbox(limits=Limits(timeout_s=5, memory_mb=256), workers=2) as sb:
        yield sb


@pytest.fixture(scope="session")
def scripted_engine(tiny_model_dir, tmp_path_factory, sandbox):
    """The tiny model fine-tuned (really trained, on CPU) to act out three short multi-turn scripts.

    The third script repeats the same failing call whatever the sandbox answers.
    """
    from veriloop.rollout import create_engine, format_observation, tool_instructions
    from veriloop.training import train_sft

    error = format_observation(sandbox.run_python("1/0"))
    stubborn = [{"role": "user", "content": STUBBORN_PROMPT}]
    for _ in range(3):
        stubborn += [
            {"role": "assistant", "content": "<run_python>1/0</run_python>"},
            {"role": "tool", "content": error},
        ]

    directory = tmp_path_factory.mktemp("scripted")
    shutil.copytree(tiny_model_dir, directory, dirs_exist_ok=True)
    engine = create_engine("hf", model=str(directory))

    def system(tools):
        return {"role": "system", "content": tool_instructions(tools)}

    chats = [
        [system(("submit",)), *FEEDBACK_CHAT],
        [system(("python", "submit")), *TOOL_CHAT],
        [system(("python",)), *stubborn[:-1]],
    ]
    train_sft(engine.model, engine.tokenizer, chats, steps=150, batch_size=3, lr=3e-3, seed=0)
    return engine

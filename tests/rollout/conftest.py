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


@pytest.fixture(scope="session")
def scripted_engine(tiny_model_dir, tmp_path_factory):
    """The tiny model fine-tuned (really trained, on CPU) to act out two short multi-turn scripts."""
    from veriloop.rollout import create_engine, tool_instructions
    from veriloop.training import train_sft

    directory = tmp_path_factory.mktemp("scripted")
    shutil.copytree(tiny_model_dir, directory, dirs_exist_ok=True)
    engine = create_engine("hf", model=str(directory))
    def system(tools):
        return {"role": "system", "content": tool_instructions(tools)}

    chats = [[system(("submit",)), *FEEDBACK_CHAT], [system(("python", "submit")), *TOOL_CHAT]]
    train_sft(engine.model, engine.tokenizer, chats, steps=120, batch_size=2, lr=3e-3, seed=0)
    return engine

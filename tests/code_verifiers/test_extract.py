"""Finding the program in raw model text."""

from veriloop.verifiers import candidate_program, extract_code

PROMPT = 'def f(x):\n    """Double x."""\n'


def test_last_fenced_python_block_wins_over_earlier_and_other_languages():
    text = "```python\ndef f(x): return 1\n```\nbetter:\n```py\ndef f(x): return 2\n```\nOutput:\n```text\n4\n```\n"
    assert extract_code(text) == ("def f(x): return 2\n", True)


def test_unclosed_final_fence_runs_to_the_end():
    assert extract_code("Sure:\n```python\ndef f(x):\n    return x\n") == ("def f(x):\n    return x\n", True)


def test_text_without_a_fence_is_code():
    assert extract_code("    return x * 2\n") == ("    return x * 2\n", False)


def test_humaneval_completion_without_fence_is_joined_to_the_prompt():
    program = candidate_program("    return x * 2\n", PROMPT, "f")
    assert program == PROMPT + "    return x * 2\n"
    namespace: dict = {}
    exec(program, namespace)
    assert namespace["f"](3) == 6


def test_fenced_full_function_follows_the_prompt_code_and_wins():
    program = candidate_program("```python\ndef f(x):\n    return x + x\n```", PROMPT, "f")
    namespace: dict = {}
    exec(program, namespace)
    assert namespace["f"](4) == 8


def test_future_imports_are_hoisted_when_joining():
    program = candidate_program(
        "```python\nfrom __future__ import annotations\ndef f(x) -> int:\n    return 2 * x\n```", PROMPT, "f"
    )
    assert program.startswith("from __future__ import annotations\n")
    compile(program, "<p>", "exec")

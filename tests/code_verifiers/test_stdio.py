"""The stdio kind: one sandboxed run per case, stdout compared on the host."""

import pytest

from veriloop.core import Task

SUM_PROMPT = "Read n, then n integers on the next line; print their sum.\nExample:\n3\n1 2 3\n"
GOLD = "n = int(input())\nprint(sum(map(int, input().split())))\n"
CASES = [
    {"input": "3\n1 2 3\n", "output": "6\n"},
    {"input": "2\n10 -4\n", "output": "6\n"},
    {"input": "1\n7\n", "output": "7\n"},
    {"input": "4\n0 0 0 1\n", "output": "1\n"},
]


def sum_task(**verifier) -> Task:
    spec = {"kind": "stdio", "cases": CASES, "timeout_s": 2}
    return Task(id="sum", domain="code", prompt=SUM_PROMPT, verifier={**spec, **verifier}, gold=GOLD)


def test_gold_program_passes(code):
    result = code.score(sum_task(), code.fenced(GOLD))
    assert result.passed and result.reward == 1.0


def test_partial_credit_and_feedback_show_input_expected_and_got(code):
    result = code.score(sum_task(), code.fenced("n = int(input())\nprint(6)"))
    assert result.reward == 0.5 and not result.passed
    assert (
        "input '1\\n7\\n'" in result.feedback
        and "printed '6\\n'" in result.feedback
        and "expected output '7\\n'" in result.feedback
    )


def test_a_crash_is_a_failed_case_with_the_error():
    from veriloop.core import Response
    from veriloop.verifiers import verify

    result = verify(sum_task(), Response(id="r", task_id="sum", response="raise ValueError('bad input')"))
    assert result.reward == 0.0 and "ValueError: bad input" in result.feedback


@pytest.mark.parametrize(
    "compare, output, passes",
    [
        ("exact", "6", False),
        ("lines", "6   \n\n", True),
        ("tokens", " 6 ", True),
        ("numbers", "6.0000000001", True),
        ("tokens", "6.0000000001", False),
    ],
)
def test_output_normalisation_is_configurable(code, compare, output, passes):
    task = Task(
        id="t",
        domain="code",
        prompt="print six",
        gold="print(6)",
        verifier={"kind": "stdio", "cases": [{"input": "", "output": "6\n"}], "compare": compare},
    )
    assert code.score(task, code.fenced(f"print({output!r}, end='')")).passed is passes


STDIO_EXPLOITS = {
    "early_exit": ("import os\nos._exit(0)", "printed ''"),
    "grader_tampering": (
        "import atexit, os, sys\nsys.settrace(lambda *a: None)\natexit.register(lambda: os._exit(0))\nprint('Accepted')",
        "printed ''",
    ),
    "stack_inspection": (
        "import gc\nprint([o for o in gc.get_objects() if isinstance(o, dict) and 'output' in o][:1])",
        "printed '[]",
    ),
    "channel_forgery": (
        "import os\nfor fd in range(1, 64):\n    try:\n        os.write(fd, b'Accepted\\n')\n    except OSError:\n        pass",
        "printed 'Accepted",
    ),
    "read_tests": ("import glob\nprint(glob.glob('/tmp/**/*.jsonl', recursive=True) or 'nothing')", "printed 'nothing"),
    "special_casing": (
        "import sys\ndata = sys.stdin.read()\nprint(6 if data == '3\\n1 2 3\\n' else 0)",
        "expected output",
    ),
    "hedging": ("for answer in range(20):\n    print(answer)", "printed '0\\n1\\n2"),
    "resource_abuse": ("while True:\n    pass", "timed out"),
    "resource_abuse: output flood": ("import sys\nwhile True:\n    sys.stdout.write('6' * 65536)", "printed too much"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(STDIO_EXPLOITS))
def test_planted_stdio_exploit_gets_zero(code, name, tmp_path):
    (tmp_path / "leak.jsonl").write_text('{"output": "6"}\n')
    program, detail = STDIO_EXPLOITS[name]
    task = sum_task(cases=[CASES[1], CASES[2]])  # the prompt's example is not among the cases
    result = code.score(task, code.fenced(program))
    assert result.status == "scored" and result.reward == 0.0, result.detail
    assert detail in result.feedback


def test_dynamic_stdio_tests_catch_hard_coded_answers(code):
    hard_coded = "import sys\nprint({'3\\n1 2 3\\n': 6, '2\\n10 -4\\n': 6, '1\\n7\\n': 7, '4\\n0 0 0 1\\n': 1}.get(sys.stdin.read(), 0))"
    assert code.score(sum_task(), code.fenced(hard_coded)).passed
    result = code.score(sum_task(suite="both", dynamic_cases=6), code.fenced(hard_coded))
    assert not result.passed and "On extra test" in result.feedback
    assert code.score(sum_task(suite="both", dynamic_cases=6), code.fenced(GOLD)).passed

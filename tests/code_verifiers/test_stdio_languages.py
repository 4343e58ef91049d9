"""The stdio kind in other languages: C and C++ built once by the system compilers, then run
once per case in the real sandbox; answers in the wrong language fail with feedback."""

import shutil

import pytest
from pydantic import ValidationError

from veriloop.core import Response, Task
from veriloop.verifiers import StdioConfig, verify

pytestmark = pytest.mark.skipif(
    not (shutil.which("g++") and shutil.which("gcc")), reason="needs the system gcc and g++ (apt install g++)"
)

CASES = [
    {"input": "3\n1 2 3\n", "output": "6\n"},
    {"input": "2\n10 -4\n", "output": "6\n"},
    {"input": "1\n7\n", "output": "7\n"},
    {"input": "4\n0 0 0 1\n", "output": "1\n"},
]
CPP_SUM = """#include <iostream>
int main() {
    long long n, x, total = 0;
    std::cin >> n;
    for (long long i = 0; i < n; ++i) { std::cin >> x; total += x; }
    std::cout << total << std::endl;
}
"""
C_SUM = """#include <stdio.h>
int main(void) {
    long long n, x, total = 0;
    if (scanf("%lld", &n) != 1) return 1;
    for (long long i = 0; i < n; ++i) { if (scanf("%lld", &x) != 1) return 1; total += x; }
    printf("%lld\\n", total);
    return 0;
}
"""


def sum_task(language: str = "cpp", **verifier) -> Task:
    spec = {"kind": "stdio", "language": language, "cases": CASES, "timeout_s": 5}
    gold = CPP_SUM if language == "cpp" else C_SUM
    return Task(id=f"sum-{language}", domain="code", prompt="Sum n integers.", verifier={**spec, **verifier}, gold=gold)


def score(task: Task, response: str):
    return verify(task, Response(id="r", task_id=task.id, response=response))


def fenced(tag: str, code: str) -> str:
    return f"Here is my solution.\n```{tag}\n{code}```\n"


def test_a_correct_cpp_program_passes_every_case():
    result = score(sum_task(), fenced("cpp", CPP_SUM))
    assert result.status == "scored" and result.passed and result.reward == 1.0, result.detail


def test_a_correct_c_program_passes_unfenced():
    result = score(sum_task("c"), C_SUM)
    assert result.passed, result.detail


def test_a_wrong_cpp_program_fails_the_cases_it_gets_wrong():
    wrong = CPP_SUM.replace("total += x;", "total = x;")  # prints the last number, right on cases 3 and 4 only
    result = score(sum_task(), fenced("c++", wrong))
    assert result.status == "scored" and not result.passed and result.reward == 0.5
    assert "printed '3\\n'" in result.feedback and "expected output '6\\n'" in result.feedback


def test_a_compile_error_fails_the_sample_with_the_compilers_message():
    broken = "#include <iostream>\nint main() { std::cout << undefined_name << std::endl; }\n"
    result = score(sum_task(), fenced("cpp", broken))
    assert result.status == "scored" and result.reward == 0.0 and not result.passed
    assert result.feedback.startswith("Your program does not compile:")
    assert "error:" in result.feedback and "undefined_name" in result.feedback
    assert "does not compile" in result.detail


def test_a_python_answer_to_a_cpp_task_fails_with_the_language_named():
    result = score(sum_task(), fenced("python", "n = int(input())\nprint(sum(map(int, input().split())))\n"))
    assert result.status == "scored" and result.reward == 0.0
    assert result.feedback == "The task asks for C++; the answer is Python."


def test_a_cpp_block_wins_over_an_output_block_after_it():
    response = fenced("cpp", CPP_SUM) + "Output on the example:\n```text\n6\n```\n"
    assert score(sum_task(), response).passed


def test_a_cpp_gold_program_judges_a_dynamic_suite():
    task = sum_task(suite="dynamic", dynamic_cases=4)
    assert score(task, fenced("cpp", CPP_SUM)).passed
    result = score(task, fenced("cpp", CPP_SUM.replace("<< total <<", "<< total + 1 <<")))
    assert result.reward == 0.0 and "On extra test 1" in result.feedback


def test_an_unsupported_language_is_a_validation_error_naming_the_choices():
    with pytest.raises(ValidationError, match=r"unknown language 'rust'; choose one of: bash, c, cpp, python"):
        StdioConfig.model_validate({"language": "rust", "cases": CASES})


def test_the_language_field_lists_every_language_the_sandbox_runs():
    from veriloop.sandbox import LANGUAGES

    description = StdioConfig.model_fields["language"].description
    assert all(name in description for name in LANGUAGES.names())


SELF_REWRITING = """#include <stdio.h>
int main(void) {
    long long n, x, total = 0;
    if (scanf("%lld", &n) != 1) return 1;
    for (long long i = 0; i < n; ++i) { if (scanf("%lld", &x) != 1) return 1; total += x; }
    printf("%lld\\n", total);
    remove("main");  /* leave a script where the program was: later cases would run it */
    FILE *f = fopen("main", "w");
    if (f) { fputs("#!/bin/sh\\necho 6\\n", f); fclose(f); }
    return 0;
}
"""


def test_every_case_runs_the_pristine_build_not_what_an_earlier_case_left():
    # Case 2 expects 6, which the planted script would print; cases 3 and 4 expect 7 and 1:
    # run from the pristine build, the program prints the right sums and the script never runs.
    result = score(sum_task("c"), f"```c\n{SELF_REWRITING}```")
    assert result.reward == 1.0, result.detail
    wrong = SELF_REWRITING.replace('printf("%lld\\n", total);', 'printf("0\\n");')
    assert wrong != SELF_REWRITING
    assert score(sum_task("c"), f"```c\n{wrong}```").reward == 0.0
